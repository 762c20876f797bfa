"""The paged replay's loop: arrivals, steps, the pool recorded after each (the entry).

Plain Python over the int64 arrays of `paged_layout`, compiled whole by numba (`jit`:
every function but `run` is inlined into it, and its cache covers every kernel file it
reaches); `replay.paged` builds the arrays and runs it. Each iteration is one engine
step (`paged_step`, which mirrors engine/scheduler.py), or a span of steps that only
decode, applied at once (`paged_span`). Requests arrive by the one arrival rule
(`arrivals_kernel`: an open loop's steps, or a closed loop's answers). A step that
scheduled a token is recorded after its finishes (fragmentation/exact.py's `account`).
"""

from __future__ import annotations

import numpy as np

from perfkit.jit import kernel, unowned
from perfkit.replay import arrivals_kernel as arrivals
from perfkit.replay.arrivals import NEVER
from perfkit.replay.arrivals_kernel import ARRIVAL, NUM_REQ, NXT
from perfkit.replay.paged_blocks import cdiv, heap_push, note
from perfkit.replay.paged_layout import (
    ARRIVE,
    BS,
    DONE,
    FINAL,
    FREE,
    INTERNAL,
    KEY,
    NALIVE,
    NB,
    NF,
    NHEAP,
    NTL,
    PEAK_FREE,
    PEAK_INT,
    PEAK_OCC,
    PEAK_RES,
    PEAK_SAVED,
    PEAK_SEQS,
    PEAK_STEP,
    PEAK_USED,
    REJECT,
    REJECTED,
    SAVED,
    STAT,
    STEP,
    STEPS,
    SUM_COMP,
    SUM_FREE,
    SUM_INT,
    SUM_RES,
    SUM_SAVED,
    SUM_USED,
    TIMELINE,
    WAITING,
    P,
    T,
)
from perfkit.replay.paged_span import fast_forward, span_length
from perfkit.replay.paged_step import step

view = unowned(__name__)  # run's arrays without their owner: no atomic counts per call


@kernel
def arrive(req, q, cfg, s, lg, i):
    """Queue i, or reject it: prompt >= max_model_len (then final <= prompt: max_tokens
    >= 1), or more blocks at its end than the pool holds."""
    final = req[i * NF + FINAL]
    if req[i * NF + P] >= final or cdiv(final, cfg[BS]) > cfg[NB]:
        req[i * NF + STAT] = DONE
        s[REJECTED] += 1
        note(cfg, s, lg, REJECT, i, 0)
        arrivals.rejected(req, NF, cfg, s, s[T])
        return
    req[i * NF + STAT] = WAITING
    note(cfg, s, lg, ARRIVE, i, 0)
    heap_push(q, s, req[i * NF + KEY])


@kernel
def record(cfg, s, lg, ran, tl):
    """Step T ran `ran` requests: add its pool by kind; a peak candidate, a timeline row."""
    bs = cfg[BS]
    alloc = cfg[NB] - s[FREE]
    used = s[SUM_COMP] - s[SAVED] * bs
    reserved = alloc * bs - used - s[INTERNAL]
    s[SUM_USED] += used
    s[SUM_RES] += reserved
    s[SUM_INT] += s[INTERNAL]
    s[SUM_FREE] += s[FREE] * bs
    s[SUM_SAVED] += s[SAVED]
    s[PEAK_SAVED] = max(s[PEAK_SAVED], s[SAVED])
    s[PEAK_SEQS] = max(s[PEAK_SEQS], ran)
    if alloc * bs > s[PEAK_OCC] or s[PEAK_STEP] < 0:
        s[PEAK_OCC], s[PEAK_STEP] = alloc * bs, s[T]
        s[PEAK_USED], s[PEAK_RES], s[PEAK_INT] = used, reserved, s[INTERNAL]
        s[PEAK_FREE] = s[FREE] * bs
    s[STEPS] += 1
    note(cfg, s, lg, STEP, -1, alloc)
    if cfg[TIMELINE] == 1:
        if s[NTL] == len(tl):
            grown = np.zeros((2 * len(tl) + 16, 2), np.int64)
            grown[: len(tl)] = tl
            tl = grown
        tl[s[NTL], 0] = alloc
        tl[s[NTL], 1] = used
        s[NTL] += 1
    return tl


@kernel
def run(req, q, grp, cfg, s, lg, tl):
    """Step until every request finished or was rejected; returns the timeline rows
    (tl keeps its owner: `record` may replace it)."""
    req, q, grp, cfg, s = view(req), view(q), view(grp), view(cfg), view(s)
    lg = view(lg)
    n = s[NUM_REQ]
    s[T] = req[ARRIVAL] if n > 0 else 0  # request 0's
    while True:
        while arrivals.due(req, NF, s, s[T]):
            arrive(req, q, cfg, s, lg, s[NXT])
            s[NXT] += 1
        if s[NALIVE] == 0 and s[NHEAP] == 0:
            nxt = arrivals.next_arrival(req, NF, s)
            if nxt >= NEVER:
                return tl
            s[T] = nxt
            continue
        span = span_length(req, q, grp, cfg, s)
        if span > 0:
            fast_forward(req, q, grp, cfg, s, span)
            continue
        ran = step(req, q, grp, cfg, s, lg)
        if ran > 0:
            tl = record(cfg, s, lg, ran, tl)
        s[T] += 1
