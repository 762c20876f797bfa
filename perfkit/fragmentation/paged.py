"""Paged KV allocation, replayed step by step with the engine's scheduling rules.

`simulate_paged` runs `paged_kernel` (the rules are there: the token budget with chunked
prefill, full-prompt admission, preemption of the newest, shared prefixes) compiled with
numba, or as plain Python (`jit`). tests/fragmentation check its steps' blocks and slots,
preemptions and peaks against the real Engine's (`exact.replay_scheduler`) and the
compiled kernel against the plain one.

What differs from the Engine: with prefix caching, only the workload's shared prefixes
are cached (whole groups, evicted oldest first); the engine also keeps every block's
hash, so a preempted request that comes back may hit its own blocks, and it evicts
block by block in LRU order. A prefix longer than the first chunk of the request that
computes it counts as cached from that first chunk.
"""

from __future__ import annotations

import numpy as np

from perfkit import jit
from perfkit.fragmentation import paged_kernel as pk
from perfkit.fragmentation.types import NEVER, PolicyResult, Slots, Trace

UNLIMITED = 1 << 40  # a token budget no step reaches: every prompt in its admission step


def _requests(trace: Trace) -> np.ndarray:
    """The kernel's request rows: [num_requests, pk.NF] (P .. SEEN), flattened."""
    n, mml = trace.num_requests, trace.max_model_len
    req = np.zeros((n, pk.NF), np.int64)
    req[:, pk.P] = trace.prompt_len
    req[:, pk.FINAL] = np.minimum(req[:, pk.P] + np.asarray(trace.max_tokens, np.int64), mml)
    req[:, pk.KEY] = (np.asarray(trace.priority, np.int64) << 32) + np.arange(n)
    req[:, pk.GROUP] = trace.prefix_group
    req[:, pk.ARRIVAL] = trace.arrival_step if not trace.clients \
        else np.where(np.arange(n) < trace.clients, 0, NEVER)
    req[:, pk.NTOK] = req[:, pk.P]
    return req.reshape(-1)


def _state(trace: Trace, num_blocks: int, block_size: int, max_num_seqs: int, budget: int,
           full_prompt: bool, prefix_caching: bool, timeline: bool
           ) -> tuple[np.ndarray, ...]:
    """(req, q, grp, cfg, s) for pk.run, flat int64 arrays (see paged_kernel)."""
    n = trace.num_requests
    groups = max(trace.prefix_group, default=-1) + 1
    shared = trace.prefix_len // block_size if prefix_caching and groups else 0
    cfg = np.array([num_blocks, block_size, max_num_seqs, budget, int(full_prompt), shared,
                    trace.clients, trace.client_delay, int(timeline)], np.int64)
    s = np.zeros(pk.NUM_SCALARS, np.int64)
    s[pk.FREE], s[pk.LAST_MEM], s[pk.LAST_CAP], s[pk.PEAK_STEP] = num_blocks, -1, -1, -1
    s[pk.LAST_BUDGET] = -1
    s[pk.ASSIGNED], s[pk.NUM_REQ], s[pk.NUM_GROUPS] = min(trace.clients, n), n, groups
    grp = np.zeros((groups + 1, pk.NG), np.int64)  # + the ring's sentinel row
    grp[:, pk.LNEXT] = grp[:, pk.LPREV] = np.arange(groups + 1)  # the empty ring
    q = np.zeros(max(n, 1) * pk.NQ, np.int64)
    return _requests(trace), q, grp.reshape(-1), cfg, s


def simulate_paged(
    trace: Trace, num_blocks: int, block_size: int, max_num_seqs: int,
    prefix_caching: bool = False, name: str | None = None, timeline: bool = False,
    max_num_batched_tokens: int = UNLIMITED, full_prompt: bool = True, use_jit: bool = True,
) -> PolicyResult:
    """Replay `trace` on a pool of `num_blocks` blocks (see module doc)."""
    if num_blocks < 1 or block_size < 1:
        raise ValueError("a paged pool needs num_blocks >= 1 and block_size >= 1")
    if max_num_batched_tokens < 1 or max_num_seqs < 1:
        raise ValueError("a paged replay needs a token budget and max_num_seqs >= 1")
    mod = jit.kernel_module(pk, use_jit)
    state = _state(trace, num_blocks, block_size, max_num_seqs, max_num_batched_tokens,
                   full_prompt, prefix_caching, timeline)
    if mod is not pk:  # plain Python indexes lists faster than arrays
        state = tuple(a.tolist() for a in state)
    tl = mod.run(*state, np.zeros((0, 2), np.int64))
    s = state[-1]
    return _result(s, tl, name or f"paged-{block_size}" + ("+prefix" if prefix_caching
                                                              else ""), block_size, num_blocks)


def _result(s: list[int] | np.ndarray, tl: np.ndarray, name: str, block_size: int,
            num_blocks: int) -> PolicyResult:
    v = [int(x) for x in s]
    timeline = [(int(b), int(u)) for b, u in tl[: v[pk.NTL]]]
    return PolicyResult(
        name=name, kind="paged", block_size=block_size, pool_slots=num_blocks * block_size,
        num_blocks=num_blocks, num_steps=v[pk.STEPS],
        totals=Slots(v[pk.SUM_USED], v[pk.SUM_RES], v[pk.SUM_INT], 0, v[pk.SUM_FREE]),
        peak=Slots(v[pk.PEAK_USED], v[pk.PEAK_RES], v[pk.PEAK_INT], 0, v[pk.PEAK_FREE]),
        peak_step=v[pk.PEAK_STEP], free_gap_sum=0.0, free_gap_peak=0.0,
        saved_block_steps=v[pk.SUM_SAVED], peak_saved_blocks=v[pk.PEAK_SAVED],
        peak_sequences=v[pk.PEAK_SEQS], num_finished=v[pk.FINISHED],
        num_rejected=v[pk.REJECTED], num_preempted=v[pk.PREEMPTED],
        num_queued_for_memory=v[pk.QMEM], num_queued_for_seqs=v[pk.QSEQS],
        num_queued_for_budget=v[pk.QBUDGET], timeline=timeline,
    )
