"""The paged replay's front: a trace and a pool -> the kernel's arrays -> `run`.

`run_paged` runs `paged_kernel` (the rules are in `paged_step`: the token budget with
chunked prefill, full-prompt admission, preemption of the newest, shared prefixes)
compiled with numba, or as plain Python (`jit`), and hands back its scalars, timeline
and decisions; fragmentation/paged.py reads the pool's accounting from them.

What differs from the Engine, with prefix caching only (tests/replay/test_conformance.py
pins three of these): the kernel caches the workload's shared prefixes, whole groups
evicted oldest first once the free blocks no longer cover them, and counts a request's
own blocks as plain free blocks. The engine hashes every full block: freed ones join one
LRU queue (tail first) and are evicted block by block once the unhashed free blocks run
out. So there a released prefix goes as soon as it is the oldest cached block, or only
partly; a preempted request that comes back hits its own cached blocks. And the kernel
takes a shared prefix's blocks whole with the first chunk of the request that computes
it (`paged_blocks.head_need`), where the engine takes and caches them chunk by chunk.
docs/commands/fragmentation.md ("Limits") gives the effect on the shared-prefix profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfkit import jit
from perfkit.replay import arrivals_kernel as ak
from perfkit.replay import paged_kernel as pk
from perfkit.replay import paged_layout as pl
from perfkit.replay.trace import Trace

UNLIMITED = 1 << 40  # a token budget no step reaches: every prompt in its admission step
Decision = tuple[int, int, int, int]  # (step, kind, request, value): paged_layout's lg rows


@dataclass(frozen=True)
class PagedPool:
    """The pool and the scheduler's rules a paged replay runs under."""

    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int = UNLIMITED
    full_prompt: bool = True  # admission: the blocks of all the prompt's tokens must fit
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        if self.num_blocks < 1 or self.block_size < 1:
            raise ValueError("a paged pool needs num_blocks >= 1 and block_size >= 1")
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise ValueError("a paged replay needs a token budget and max_num_seqs >= 1")


@dataclass
class PagedRun:
    s: list[int]  # the kernel's scalars after the run, by paged_layout's names
    timeline: list[tuple[int, int]]  # (blocks, slots used) per step that ran (timeline)
    decisions: list[Decision]  # every decision in order (log)


def _requests(trace: Trace) -> np.ndarray:
    """The kernel's request rows: [num_requests, pl.NF] (ARRIVAL .. SEEN), flattened."""
    n, mml = trace.num_requests, trace.max_model_len
    req = np.zeros((n, pl.NF), np.int64)
    req[:, ak.ARRIVAL] = ak.first_column(trace.arrivals, n)
    req[:, pl.P] = trace.prompt_len
    req[:, pl.FINAL] = np.minimum(req[:, pl.P] + np.asarray(trace.max_tokens, np.int64), mml)
    req[:, pl.KEY] = (np.asarray(trace.priority, np.int64) << 32) + np.arange(n)
    req[:, pl.GROUP] = trace.prefix_group
    req[:, pl.NTOK] = req[:, pl.P]
    return req.reshape(-1)


def _state(trace: Trace, pool: PagedPool, timeline: bool, log_rows: int
           ) -> tuple[np.ndarray, ...]:
    """(req, q, grp, cfg, s, lg) for pk.run, flat int64 arrays (see paged_layout)."""
    n, bs = trace.num_requests, pool.block_size
    groups = max(trace.prefix_group, default=-1) + 1
    shared = trace.prefix_len // bs if pool.prefix_caching and groups else 0
    cfg = np.zeros(pl.NUM_CFG, np.int64)
    cfg[[ak.CLIENTS, ak.DELAY]] = ak.rule_fields(trace.arrivals)
    cfg[[pl.NB, pl.BS, pl.CAP, pl.BUDGET, pl.FULL, pl.SHARED, pl.TIMELINE, pl.LOG]] = (
        pool.num_blocks, bs, pool.max_num_seqs, pool.max_num_batched_tokens,
        int(pool.full_prompt), shared, int(timeline), int(log_rows > 0))
    s = np.zeros(pl.NUM_SCALARS, np.int64)
    s[pl.FREE], s[pl.LAST_MEM], s[pl.LAST_CAP], s[pl.PEAK_STEP] = pool.num_blocks, -1, -1, -1
    s[pl.LAST_BUDGET] = -1
    s[ak.ASSIGNED], s[ak.NUM_REQ] = ak.assigned_at_start(trace.arrivals, n), n
    s[pl.NUM_GROUPS] = groups
    grp = np.zeros((groups + 1, pl.NG), np.int64)  # + the ring's sentinel row
    grp[:, pl.LNEXT] = grp[:, pl.LPREV] = np.arange(groups + 1)  # the empty ring
    q = np.zeros(max(n, 1) * pl.NQ, np.int64)
    lg = np.zeros(max(log_rows, 1) * pl.NL, np.int64)
    return _requests(trace), q, grp.reshape(-1), cfg, s, lg


def run_paged(trace: Trace, pool: PagedPool, timeline: bool = False, log: bool = False,
              use_jit: bool = True) -> PagedRun:
    """Replay `trace` on `pool` (see module doc); `log`: every decision, step by step."""
    mod = jit.kernel_module(pk, use_jit)
    rows = 16 * trace.num_requests + 64 if log else 0
    while True:
        state = _state(trace, pool, timeline, rows)
        if mod is not pk:  # plain Python indexes lists faster than arrays
            state = tuple(a.tolist() for a in state)
        tl = mod.run(*state, np.zeros((0, 2), np.int64))
        s, lg = [int(x) for x in state[4]], state[5]
        if s[pl.NLOG] * pl.NL <= len(lg):
            break
        rows = s[pl.NLOG]  # the log ran past its rows: again, with room for them all
    timeline_rows = [(int(b), int(u)) for b, u in tl[: s[pl.NTL]]]
    flat = [int(x) for x in lg[: s[pl.NLOG] * pl.NL]]
    decisions = [(flat[k], flat[k + 1], flat[k + 2], flat[k + 3])
                 for k in range(0, len(flat), pl.NL)]
    return PagedRun(s, timeline_rows, decisions)
