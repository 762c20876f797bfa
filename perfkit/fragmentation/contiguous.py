"""Contiguous KV allocation (Orca-style): one reservation per request, placed first fit.

Every request reserves one run of slots in a single address space [0, pool)
when it is admitted, and keeps it until it finishes. The reservation is
  reserve-max  max_model_len
  pow2         the next power of two of kv_len (at most max_model_len)
  oracle       exactly kv_len (an oracle that knows the output length)
Placement is first fit over the holes in address order, and a freed run merges
with its neighbours, so external fragmentation is measured, not assumed.

Time model (the same as the paged replay and the engine, without a token
budget): at step t, arrivals up to t join the queue; the queue head is admitted
while its reservation fits and fewer than max_num_seqs run (FCFS, no
overtaking); an admitted request computes its prompt in that step, then one
token per step, and is freed at the end of step `a + kv_len - P` (= a + M - 1). A step is recorded
(after the frees) when a request ran in it. The state changes only at admissions
and finishes, so the replay jumps between those events: cost O(requests x holes).
The loop is `contiguous_kernel` (compiled by numba, or plain Python: see `jit`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from perfkit import jit
from perfkit.fragmentation import contiguous_kernel as ck
from perfkit.fragmentation.types import PolicyResult, Slots
from perfkit.replay import arrivals_kernel as ak
from perfkit.replay.trace import Trace

Reserve = Callable[[int, int], int]  # (kv_len, max_model_len) -> slots reserved


def reserve_max(kv_len: int, max_model_len: int) -> int:
    return max_model_len


def reserve_pow2(kv_len: int, max_model_len: int) -> int:
    return min(1 << (kv_len - 1).bit_length(), max_model_len)


def reserve_exact(kv_len: int, max_model_len: int) -> int:
    return kv_len


def _sizes(reserve: Reserve, kv: np.ndarray, max_model_len: int) -> np.ndarray:
    """reserve(kv_len, max_model_len) per request; the three policies without a loop."""
    if reserve is reserve_max:
        return np.full_like(kv, max_model_len)
    if reserve is reserve_exact:
        return kv.copy()
    if reserve is reserve_pow2:  # frexp's exponent of k - 1 is its bit_length (k < 2^53)
        return np.minimum(np.left_shift(1, np.frexp(kv - 1)[1].astype(np.int64)),
                          max_model_len)
    return np.array([reserve(int(k), max_model_len) for k in kv], np.int64)


def _state(trace: Trace, pool_slots: int, reserve: Reserve, max_num_seqs: int
           ) -> tuple[np.ndarray, ...]:
    """(req, wait, fin, hs, hl, cfg, s) for ck.run (see contiguous_kernel)."""
    n, mml = trace.num_requests, trace.max_model_len
    req = np.zeros((n, ck.NF), np.int64)
    req[:, ck.P] = trace.prompt_len
    req[:, ck.KV] = np.minimum(req[:, ck.P] + np.asarray(trace.max_tokens, np.int64), mml) - 1
    req[:, ck.SIZE] = _sizes(reserve, req[:, ck.KV], mml)
    req[:, ck.KEY] = (np.asarray(trace.priority, np.int64) << 32) + np.arange(n)
    req[:, ak.ARRIVAL] = ak.first_column(trace.arrivals, n)
    cfg = np.zeros(ck.NUM_CFG, np.int64)
    cfg[[ak.CLIENTS, ak.DELAY]] = ak.rule_fields(trace.arrivals)
    cfg[ck.POOL], cfg[ck.CAP] = pool_slots, max_num_seqs
    s = np.zeros(ck.NUM_SCALARS, np.int64)
    s[ck.NH] = 1 if pool_slots else 0
    s[ck.DIRTY], s[ck.LAST_MEM], s[ck.LAST_CAP], s[ak.NUM_REQ] = 1, -1, -1, n
    s[ck.PEAK_FREE], s[ck.PEAK_ALLOC], s[ck.PEAK_STEP] = pool_slots, -1, -1
    s[ak.ASSIGNED] = ak.assigned_at_start(trace.arrivals, n)
    hs, hl = np.zeros(n + 2, np.int64), np.zeros(n + 2, np.int64)  # one hole more than runs
    hl[0] = pool_slots
    size = max(n, 1)
    return (req.reshape(-1), np.zeros(size, np.int64), np.zeros(size, np.int64), hs, hl,
            cfg, s)


def simulate_contiguous(
    trace: Trace, pool_slots: int, reserve: Reserve, max_num_seqs: int, name: str,
    use_jit: bool = True,
) -> PolicyResult:
    """Replay `trace` with one contiguous reservation per request (see module doc)."""
    mod = jit.kernel_module(ck, use_jit)
    state = _state(trace, pool_slots, reserve, max_num_seqs)
    if mod is not ck:  # plain Python indexes lists faster than arrays
        state = tuple(a.tolist() for a in state)
    gaps = [0.0, 0.0] if mod is not ck else np.zeros(2, np.float64)
    mod.run(*state, gaps)
    v = [int(x) for x in state[-1]]
    return PolicyResult(
        name=name, kind="contiguous", block_size=None, pool_slots=pool_slots, num_blocks=None,
        num_steps=v[ck.STEPS],
        totals=Slots(v[ck.SUM_USED], v[ck.SUM_RES], v[ck.SUM_INT], v[ck.SUM_EXT],
                     v[ck.SUM_FREE]),
        peak=Slots(v[ck.PEAK_USED], v[ck.PEAK_RES], v[ck.PEAK_INT], v[ck.PEAK_EXT],
                   v[ck.PEAK_FREE]),
        peak_step=v[ck.PEAK_STEP], free_gap_sum=float(gaps[ck.GAP_SUM]),
        free_gap_peak=float(gaps[ck.GAP_PEAK]), saved_block_steps=0, peak_saved_blocks=0,
        peak_sequences=v[ck.PEAK_SEQS], num_finished=v[ck.FINISHED],
        num_rejected=v[ck.REJECTED], num_preempted=0, num_queued_for_memory=v[ck.QMEM],
        num_queued_for_seqs=v[ck.QSEQS],
    )
