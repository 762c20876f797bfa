"""Steps that only decode, at once: the paged replay's shortcut (`paged_kernel.run`).

While every running request decodes one token a step and nothing else happens (no
finish, arrival, admission or preemption), the steps differ only by arithmetic: used
slots grow by the running count per step, a request's blocks by cdiv of its overflow.
`span_length` finds such a span, `fast_forward` records and applies it in one pass. Off
with a timeline or a decision log (rows per step); tests/fragmentation/test_fast_paths.py
checks it equals the steps it replaces.
"""

from __future__ import annotations

from perfkit.jit import kernel
from perfkit.replay.arrivals import NEVER
from perfkit.replay.arrivals_kernel import ARRIVAL, NUM_REQ, NXT
from perfkit.replay.paged_blocks import cdiv, group_evict, head_fits, set_blocks
from perfkit.replay.paged_layout import (
    BS,
    BUDGET,
    CAP,
    COMP,
    FIN_HINT,
    FINAL,
    FREE,
    HEAP,
    LAST_BUDGET,
    LAST_CAP,
    LAST_MEM,
    LOG,
    MASK,
    NALIVE,
    NB,
    NBLK,
    NF,
    NHEAP,
    NQ,
    NRUN,
    NTOK,
    PEAK_FREE,
    PEAK_INT,
    PEAK_OCC,
    PEAK_RES,
    PEAK_SAVED,
    PEAK_SEQS,
    PEAK_STEP,
    PEAK_USED,
    REMOVED,
    RUN,
    SAVED,
    SHARED,
    STEPS,
    SUM_COMP,
    SUM_FREE,
    SUM_INT,
    SUM_RES,
    SUM_SAVED,
    SUM_USED,
    TIMELINE,
    T,
)


@kernel
def tri(m, bs):
    """sum of cdiv(y, bs) for y in 1..m (0 for m <= 0): T(q*bs + r) = bs*q(q+1)/2 + r(q+1)."""
    if m <= 0:
        return 0
    qq, rr = m // bs, m % bs
    return bs * qq * (qq + 1) // 2 + rr * (qq + 1)


@kernel
def gained(req, cfg, i, j):
    """Blocks request i (a decoder) allocates over the next j steps."""
    over = req[i * NF + COMP] + j - req[i * NF + NBLK] * cfg[BS]
    return 0 if over <= 0 else (over + cfg[BS] - 1) // cfg[BS]


@kernel
def span_gain(req, q, cfg, s, j):
    total = 0
    for k in range(s[NRUN]):
        total += gained(req, cfg, q[k * NQ + RUN], j)
    return total


@kernel
def decode_fin(req, q, s):
    """0 if a running request has more than one token to compute, else the fewest
    decode-only steps before one finishes (step T + fin finishes it). Cached in
    FIN_HINT: `commit` finds it in its pass, `fast_forward` moves it."""
    if s[FIN_HINT] >= 0:
        return s[FIN_HINT]
    fin = NEVER
    for k in range(s[NALIVE]):
        r = q[k * NQ + RUN] * NF
        if req[r + NTOK] - req[r + COMP] != 1:
            fin = 0
            break
        fin = min(fin, req[r + FINAL] - 2 - req[r + COMP])
    s[FIN_HINT] = fin
    return fin


@kernel
def span_length(req, q, grp, cfg, s):
    """Steps from T on in which every running request decodes one token and nothing else
    happens: no finish, arrival, admission or preemption (their blocks fit). 0: step T
    may do more. Never with a timeline or a log (rows per step)."""
    nrun, left = s[NALIVE], cfg[BUDGET] - s[NALIVE]
    if cfg[TIMELINE] == 1 or cfg[LOG] == 1 or nrun == 0 or left < 0 or s[REMOVED] == 1:
        return 0
    if s[NHEAP] > 0 and left > 0 and nrun < cfg[CAP] \
            and head_fits(req, grp, cfg, s, q[HEAP] & MASK, left):
        return 0  # free blocks only shrink over the span: a head that waits keeps waiting
    span = NEVER
    if s[NXT] < s[NUM_REQ]:
        span = req[s[NXT] * NF + ARRIVAL] - s[T]
    span = min(span, decode_fin(req, q, s))
    if span > 0 and nrun * (span // cfg[BS] + 1) <= s[FREE]:
        return span  # every request's blocks fit, whatever its phase: no pass to count them
    while span > 0 and span_gain(req, q, cfg, s, span) > s[FREE]:
        span //= 2
    return span


@kernel
def internal_at(req, cfg, i, j):
    """Internal slots of decoder i after the step j steps from now (j >= 0)."""
    bs, r = cfg[BS], i * NF
    return max(0, (req[r + NBLK] + gained(req, cfg, i, j + 1)) * bs - (req[r + FINAL] - 1))


@kernel
def span_peak(req, q, cfg, s, span, gain):
    """The first step of the span at its most blocks (they only grow): a peak."""
    lo, hi = 0, span - 1  # the first j whose step ends with all `gain` blocks
    while lo < hi:
        mid = (lo + hi) // 2
        if span_gain(req, q, cfg, s, mid + 1) == gain:
            hi = mid
        else:
            lo = mid + 1
    bs, internal = cfg[BS], 0
    for k in range(s[NRUN]):
        internal += internal_at(req, cfg, q[k * NQ + RUN], lo)
    alloc = cfg[NB] - s[FREE] + gain
    used = s[SUM_COMP] - s[SAVED] * bs + s[NALIVE] * (lo + 1)
    s[PEAK_OCC], s[PEAK_STEP] = alloc * bs, s[T] + lo
    s[PEAK_USED], s[PEAK_INT] = used, internal
    s[PEAK_RES], s[PEAK_FREE] = alloc * bs - used - internal, (cfg[NB] - alloc) * bs


@kernel
def fast_forward(req, q, grp, cfg, s, span):
    """Record and apply `span` decode-only steps (span_length) in closed form: used slots
    grow by the running count per step, a request's blocks by cdiv of its overflow, its
    internal slots appear with its last block (span_internal's rule). One pass."""
    bs, nrun, nb = cfg[BS], s[NALIVE], cfg[NB]
    used0, alloc0 = s[SUM_COMP] - s[SAVED] * bs, nb - s[FREE]
    block_steps = gain = internal = 0
    for k in range(nrun):
        i = q[k * NQ + RUN]
        r = i * NF
        x = req[r + COMP] - req[r + NBLK] * bs
        block_steps += tri(max(0, x + span), bs) - tri(max(0, x), bs)
        gain += gained(req, cfg, i, span)
        kv = req[r + FINAL] - 1
        last = cdiv(kv, bs)
        if req[r + NBLK] >= last:
            internal += span * max(0, req[r + NBLK] * bs - kv)
        else:
            first = max(0, (last - req[r + NBLK] - 1) * bs - x)  # its first step there
            internal += (last * bs - kv) * max(0, span - first)
    used = span * used0 + nrun * span * (span + 1) // 2
    blocks = span * alloc0 + block_steps
    s[SUM_USED] += used
    s[SUM_INT] += internal
    s[SUM_RES] += blocks * bs - used - internal
    s[SUM_FREE] += (span * nb - blocks) * bs
    s[SUM_SAVED] += span * s[SAVED]
    s[PEAK_SAVED] = max(s[PEAK_SAVED], s[SAVED])
    s[PEAK_SEQS] = max(s[PEAK_SEQS], nrun)
    s[STEPS] += span
    if (alloc0 + gain) * bs > s[PEAK_OCC] or s[PEAK_STEP] < 0:
        span_peak(req, q, cfg, s, span, gain)
    if s[NHEAP] > 0 and cfg[BUDGET] == nrun:
        s[LAST_BUDGET] = s[T] + span - 1
    if s[NHEAP] > 0 and cfg[BUDGET] > nrun:  # the head waited at every step of the span
        if nrun >= cfg[CAP]:
            s[LAST_CAP] = s[T] + span - 1
        else:
            s[LAST_MEM] = s[T] + span - 1
    for k in range(nrun):
        i = q[k * NQ + RUN]
        g = gained(req, cfg, i, span)
        if g > 0:
            set_blocks(req, cfg, s, i, req[i * NF + NBLK] + g)
        req[i * NF + COMP] += span
        req[i * NF + NTOK] += span
    s[FREE] -= gain
    s[SUM_COMP] += nrun * span
    if cfg[SHARED] > 0:
        group_evict(grp, cfg, s)
    s[T] += span
    s[FIN_HINT] -= span  # span_length set it, >= span; every decoder is span tokens on
