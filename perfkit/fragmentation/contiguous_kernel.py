"""The contiguous replay's event loop over int64 arrays (compiled by numba, see `jit`).

The model is `contiguous`'s: one reservation per request, placed first fit in [0, pool),
kept until the request stores its last K/V at step a + kv_len - prompt; the queue head
is admitted while it fits and fewer than max_num_seqs run (FCFS by key, no overtaking).
The state changes only at admissions, finishes and arrivals, so the loop jumps between
them and records the steps in between at once (`record`).

Layout (flat, as replay/paged_layout.py): request i's field F at req[i * NF + F]; the free
holes as sorted starts hs[0:nh] with lengths hl[0:nh] (disjoint, non-adjacent,
non-empty); the waiting queue and the running requests' finishes as binary min-heaps of
packed keys. Requests arrive by the one arrival rule (replay/arrivals_kernel.py, whose
fields lead cfg, s and req): an open loop's steps, or a closed loop's answers.
"""

from __future__ import annotations

from perfkit.jit import kernel, unowned
from perfkit.replay import arrivals_kernel as arrivals
from perfkit.replay.arrivals import NEVER
from perfkit.replay.arrivals_kernel import ARRIVAL, NUM_REQ, NXT

POOL, CAP, NUM_CFG = range(2, 5)  # cfg, after the arrival rule's CLIENTS, DELAY
KV, SIZE, P, KEY, START, NF = range(1, 7)  # req rows, after ARRIVAL: kv_len, slots, ...
# s: the arrival rule's state, scalars, then results. NUM: running; BASE: sum(P - a) over
# running (used slots at the end of step t = BASE + NUM * t); KVSUM: their kv_len;
# ALLOC: their reserved slots
(T, NH, NWAIT, NFIN, NUM, BASE, KVSUM, ALLOC, DIRTY, LAST_MEM, LAST_CAP,
 STEPS, SUM_USED, SUM_RES, SUM_INT, SUM_EXT, SUM_FREE, PEAK_USED, PEAK_RES,
 PEAK_INT, PEAK_EXT, PEAK_FREE, PEAK_STEP, PEAK_ALLOC, PEAK_SEQS, FINISHED, REJECTED,
 QMEM, QSEQS, NUM_SCALARS) = range(3, 33)
MASK = (1 << 32) - 1
view = unowned(__name__)  # run's arrays without their owner (see jit.unowned)
# gaps (float64): the running sum of 1 - largest hole / free over recorded steps, and at
# the peak
GAP_SUM, GAP_PEAK = range(2)


@kernel
def push(heap, n, key):
    """Push `key` on heap[0:n]; returns the new size."""
    k = n
    while k > 0:
        parent = (k - 1) >> 1
        if heap[parent] <= key:
            break
        heap[k] = heap[parent]
        k = parent
    heap[k] = key
    return n + 1


@kernel
def pop(heap, n):
    """Remove heap[0] from heap[0:n]; returns the new size."""
    n -= 1
    last = heap[n]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= last:
            break
        heap[k] = heap[child]
        k = child
    if n > 0:
        heap[k] = last
    return n


# -- first fit ------------------------------------------------------------------------------
@kernel
def place(hs, hl, s, size):
    """Start of the first hole (lowest address) holding `size` slots, taken; else -1."""
    for j in range(s[NH]):
        if hl[j] >= size:
            start = hs[j]
            if hl[j] == size:
                for k in range(j, s[NH] - 1):
                    hs[k], hl[k] = hs[k + 1], hl[k + 1]
                s[NH] -= 1
            else:
                hs[j] += size
                hl[j] -= size
            return start
    return -1


@kernel
def release(hs, hl, s, start, size):
    """Free [start, start + size), merging with the holes on either side."""
    nh = s[NH]
    j = 0
    while j < nh and hs[j] < start:
        j += 1
    if j > 0 and hs[j - 1] + hl[j - 1] == start:  # merge left
        j -= 1
        hl[j] += size
    else:
        for k in range(nh, j, -1):
            hs[k], hl[k] = hs[k - 1], hl[k - 1]
        hs[j], hl[j] = start, size
        nh += 1
    if j + 1 < nh and hs[j] + hl[j] == hs[j + 1]:  # merge right
        hl[j] += hl[j + 1]
        for k in range(j + 1, nh - 1):
            hs[k], hl[k] = hs[k + 1], hl[k + 1]
        nh -= 1
    s[NH] = nh


# -- requests ---------------------------------------------------------------------------------
@kernel
def arrive(req, wait, cfg, s, i):
    """Queue i, or reject it (prompt >= max_model_len: kv_len < prompt; too large)."""
    r = i * NF
    if req[r + KV] < req[r + P] or req[r + SIZE] > cfg[POOL]:
        s[REJECTED] += 1
        arrivals.rejected(req, NF, cfg, s, s[T])
        return
    s[NWAIT] = push(wait, s[NWAIT], req[r + KEY])
    s[DIRTY] = 1


@kernel
def admit(req, wait, fin, hs, hl, cfg, s):
    """FCFS: the head is placed first fit, or the queue waits behind it."""
    t, n = s[T], s[NUM_REQ]
    while s[NWAIT] > 0:
        i = wait[0] & MASK
        r = i * NF
        if s[NUM] >= cfg[CAP]:
            s[LAST_CAP] = t
            break
        start = place(hs, hl, s, req[r + SIZE])
        if start < 0:
            s[LAST_MEM] = t
            break
        s[NWAIT] = pop(wait, s[NWAIT])
        s[QMEM] += s[LAST_MEM] >= req[r + ARRIVAL]
        s[QSEQS] += s[LAST_CAP] >= req[r + ARRIVAL]
        req[r + START] = start
        s[NFIN] = push(fin, s[NFIN], (t + req[r + KV] - req[r + P]) * n + i)
        s[NUM] += 1
        s[BASE] += req[r + P] - t
        s[KVSUM] += req[r + KV]
        s[ALLOC] += req[r + SIZE]
    s[DIRTY] = 0


@kernel
def finish(req, fin, hs, hl, cfg, s):
    """Free the reservations of requests that stored their last K/V in step T."""
    t, n = s[T], s[NUM_REQ]
    while s[NFIN] > 0 and fin[0] // n == t:
        i = fin[0] % n
        r = i * NF
        s[NFIN] = pop(fin, s[NFIN])
        release(hs, hl, s, req[r + START], req[r + SIZE])
        s[NUM] -= 1
        s[BASE] -= req[r + KV] - t  # it ends at t = a + kv_len - P: P - a = kv_len - t
        s[KVSUM] -= req[r + KV]
        s[ALLOC] -= req[r + SIZE]
        s[FINISHED] += 1
        s[DIRTY] = 1
        arrivals.finished(req, NF, cfg, s, t)


# -- recording ------------------------------------------------------------------------------
@kernel
def record(req, wait, hs, hl, cfg, s, gaps, t_next):
    """Steps T..t_next-1 (just T if nothing runs) share the state after step T. External
    slots: those in holes too small for the next request (the head, else the next
    arrival)."""
    t, pool = s[T], cfg[POOL]
    need = 0
    if s[NWAIT] > 0:
        need = req[(wait[0] & MASK) * NF + SIZE]
    elif s[NXT] < s[NUM_REQ]:
        need = req[s[NXT] * NF + SIZE]
    ext = largest = 0
    for j in range(s[NH]):
        if hl[j] < need:
            ext += hl[j]
        largest = max(largest, hl[j])
    free = pool - s[ALLOC]
    gap = 1 - largest / free if free else 0.0
    n = t_next - t if s[NUM] > 0 else 1
    used = n * s[BASE] + s[NUM] * (n * t + n * (n - 1) // 2)
    s[SUM_USED] += used
    s[SUM_RES] += n * s[KVSUM] - used
    s[SUM_INT] += n * (s[ALLOC] - s[KVSUM])
    s[SUM_EXT] += n * ext
    s[SUM_FREE] += n * (pool - s[ALLOC] - ext)
    s[STEPS] += n
    gaps[GAP_SUM] += n * gap
    if s[ALLOC] > s[PEAK_ALLOC]:
        u = s[BASE] + s[NUM] * t
        s[PEAK_USED], s[PEAK_RES], s[PEAK_INT] = u, s[KVSUM] - u, s[ALLOC] - s[KVSUM]
        s[PEAK_EXT], s[PEAK_FREE] = ext, pool - s[ALLOC] - ext
        s[PEAK_ALLOC], s[PEAK_STEP] = s[ALLOC], t
        gaps[GAP_PEAK] = gap


@kernel
def run(req, wait, fin, hs, hl, cfg, s, gaps):
    """Replay until every request finished or was rejected."""
    req, wait, fin, hs, hl = view(req), view(wait), view(fin), view(hs), view(hl)
    cfg, s, gaps = view(cfg), view(s), view(gaps)
    n = s[NUM_REQ]
    s[T] = req[ARRIVAL] if n > 0 else 0  # request 0's
    while True:
        while arrivals.due(req, NF, s, s[T]):
            arrive(req, wait, cfg, s, s[NXT])
            s[NXT] += 1
        if s[DIRTY] == 1:
            admit(req, wait, fin, hs, hl, cfg, s)
        if s[NUM] == 0:  # idle: nothing runs and nothing waits
            nxt = arrivals.next_arrival(req, NF, s)
            if nxt >= NEVER:
                return
            s[T] = nxt
            continue
        s[PEAK_SEQS] = max(s[PEAK_SEQS], s[NUM])
        finish(req, fin, hs, hl, cfg, s)
        if s[DIRTY] == 1 and s[NWAIT] > 0:
            t_next = s[T] + 1  # the head may fit now
        else:
            t_next = fin[0] // n if s[NFIN] > 0 else s[T] + 1
            if s[NXT] < n:
                t_next = min(t_next, req[s[NXT] * NF + ARRIVAL])
        record(req, wait, hs, hl, cfg, s, gaps, t_next)
        s[T] = t_next
