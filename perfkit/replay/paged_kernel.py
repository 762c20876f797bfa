"""The paged replay's step loop: `engine.scheduler.Scheduler` over block counts.

Plain Python over int64 arrays (compiled by numba, see `jit`; `paged` builds the arrays
and reads the results). One iteration is one engine step, as `Scheduler.schedule`:
- there are no prefill or decode phases: request i has ntok[i] tokens (prompt + sampled)
  and comp[i] of them computed; a step gives it min(ntok - comp, budget left) more;
- running requests go first, in admission order, then the waiting queue by key
  ((priority, arrival) packed); the budget is max_num_batched_tokens, so a long prompt
  is chunked over several steps and a request the budget does not reach waits a step;
- a running request needing blocks when too few are free preempts the running request
  with the largest key (itself last): its blocks are freed, comp = 0, and it waits again
  at its place to recompute prompt + sampled tokens; a step with a preemption admits no one;
- the queue head is admitted (no overtaking) while fewer than max_num_seqs run and its
  blocks fit: all its tokens' (full_prompt, vLLM's default) or its first chunk's;
- a request whose step computes its last token samples one; at `final` tokens
  (min(prompt + max_tokens, max_model_len)) it finishes and frees its blocks.
A step that scheduled a token is recorded after its finishes (`exact.account`).

Layout: every array is int64 and flat, rows of fields: request i's field F is
req[i * NF + F], queue slot k's q[k * NQ + Q], group g's grp[g * NG + G]. One array per
kind, and no tuples of arrays: compiled, each array a function touches costs a reference
count, so the step passes six of them, not thirty (and `run` views them without their
owner, `jit.unowned`, so a count is a null check, not an atomic add). One module: numba's
cache tracks the source file of each compiled function, not of the functions it calls
from other files.

A request's table holds cdiv(comp, bs) blocks after a step, hit[i] of them a
shared prefix it does not own. Shared prefixes (SHARED > 0: prefix caching) are whole
groups of SHARED blocks: cached from the step a request of the group is admitted,
shared by gref[g] running requests, kept (and counted free) when released, evicted
whole and oldest first when the free blocks no longer cover them.

Closed loop (CLIENTS > 0): CLIENTS requests arrive at step 0; a request finishing in
step t makes request `assigned` (the next, in order) arrive at t + 1 + DELAY; a rejected
one at t + DELAY.
"""

from __future__ import annotations

import numpy as np

from perfkit.fragmentation.types import NEVER
from perfkit.jit import kernel, unowned

# cfg: the pool and the rules
NB, BS, CAP, BUDGET, FULL, SHARED, CLIENTS, DELAY, TIMELINE = range(9)
# req: per request. P prompt, FINAL tokens at the end, KEY queue order, GROUP prefix or -1,
# ARRIVAL step; NTOK tokens, COMP computed, NBLK table blocks, HIT shared blocks held,
# STAT (UNSEEN, WAITING, RUNNING, DONE), SCHED tokens this step, SEEN admitted before
P, FINAL, KEY, GROUP, ARRIVAL, NTOK, COMP, NBLK, HIT, STAT, SCHED, SEEN, NF = range(13)
UNSEEN, WAITING, RUNNING, DONE = range(4)
# q: HEAP of waiting keys, RUN requests in admission order, SCH scheduled this step
HEAP, RUN, SCH, NQ = range(4)
# grp: GREF running sharers, GCACHED, LNEXT/LPREV the released groups oldest first
# (a ring through the sentinel row at index num_groups)
GREF, GCACHED, LNEXT, LPREV, NG = range(5)
# s: scalars. State, then results (read by `paged`).
(T, FREE, NRUN, NALIVE, NHEAP, NSCH, LEFT, PREEMPTED_NOW, REMOVED, SUM_COMP, INTERNAL,
 SAVED, CACHED_FREE, ASSIGNED, LAST_MEM, LAST_CAP, NXT, NUM_REQ, NUM_GROUPS,
 STEPS, FINISHED, REJECTED, PREEMPTED, QMEM, QSEQS, PEAK_SEQS,
 SUM_USED, SUM_RES, SUM_INT, SUM_FREE, PEAK_USED, PEAK_RES, PEAK_INT, PEAK_FREE,
 PEAK_STEP, PEAK_OCC, SUM_SAVED, PEAK_SAVED, NTL, LAST_BUDGET, QBUDGET, COVERED,
 FIN_HINT, NUM_SCALARS) = range(44)
# COVERED: the step's budget lasted to RUN's last request, so SCH lists every request
# running after it (always so far: only the newest has more than a token to compute; a
# guard). FIN_HINT: `decode_fin` of the running requests as they are now; -1: not known.
MASK = (1 << 32) - 1  # key & MASK = the request
view = unowned(__name__)  # run's arrays without their owner: no atomic counts per call


@kernel
def cdiv(a, b):
    """config.units.cdiv, compiled here: numba's cache tracks this file only."""
    return -(-a // b)


# -- the waiting queue: a binary min-heap of keys in q[k * NQ + HEAP] -----------------------
@kernel
def heap_push(q, s, key):
    k = s[NHEAP]
    s[NHEAP] = k + 1
    while k > 0:
        parent = (k - 1) >> 1
        if q[parent * NQ + HEAP] <= key:
            break
        q[k * NQ + HEAP] = q[parent * NQ + HEAP]
        k = parent
    q[k * NQ + HEAP] = key


@kernel
def heap_pop(q, s):
    n = s[NHEAP] - 1
    s[NHEAP] = n
    last = q[n * NQ + HEAP]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and q[(child + 1) * NQ + HEAP] < q[child * NQ + HEAP]:
            child += 1
        if q[child * NQ + HEAP] >= last:
            break
        q[k * NQ + HEAP] = q[child * NQ + HEAP]
        k = child
    if n > 0:
        q[k * NQ + HEAP] = last


# -- shared prefixes ------------------------------------------------------------------------
@kernel
def group_take(grp, cfg, s, g):
    """A request shares group g's prefix from now on. Returns the free blocks it revives."""
    revived = 0
    if grp[g * NG + GREF] == 0:
        if grp[g * NG + GCACHED] == 1:  # released, in the ring: take it out
            nxt, prv = grp[g * NG + LNEXT], grp[g * NG + LPREV]
            grp[prv * NG + LNEXT] = nxt
            grp[nxt * NG + LPREV] = prv
            s[CACHED_FREE] -= cfg[SHARED]
            revived = cfg[SHARED]
    else:
        s[SAVED] += cfg[SHARED]
    grp[g * NG + GREF] += 1
    grp[g * NG + GCACHED] = 1
    return revived


@kernel
def group_release(grp, cfg, s, g):
    """A sharer leaves; the last one puts the group at the ring's tail (newest) and
    returns its blocks, still cached, as free."""
    grp[g * NG + GREF] -= 1
    if grp[g * NG + GREF] >= 1:
        s[SAVED] -= cfg[SHARED]
        return 0
    end = s[NUM_GROUPS]  # the sentinel row
    tail = grp[end * NG + LPREV]
    grp[g * NG + LPREV] = tail
    grp[g * NG + LNEXT] = end
    grp[tail * NG + LNEXT] = g
    grp[end * NG + LPREV] = g
    s[CACHED_FREE] += cfg[SHARED]
    return cfg[SHARED]


@kernel
def group_evict(grp, cfg, s):
    """Keep released prefixes within the free blocks, dropping the oldest first."""
    end = s[NUM_GROUPS]
    while s[FREE] < s[CACHED_FREE]:
        g = grp[end * NG + LNEXT]
        nxt = grp[g * NG + LNEXT]
        grp[end * NG + LNEXT] = nxt
        grp[nxt * NG + LPREV] = end
        grp[g * NG + GCACHED] = 0
        s[CACHED_FREE] -= cfg[SHARED]


# -- one request's blocks ---------------------------------------------------------------------
@kernel
def set_blocks(req, cfg, s, i, num):
    """Table of i becomes `num` blocks; internal = table slots beyond its kv_len."""
    bs, kv, r = cfg[BS], req[i * NF + FINAL] - 1, i * NF
    s[INTERNAL] += max(0, num * bs - kv) - max(0, req[r + NBLK] * bs - kv)
    req[r + NBLK] = num


@kernel
def leave(req, grp, cfg, s, i, new_stat):
    """i stops running (finished or preempted): its own blocks are free, its prefix
    released; its computed tokens leave the pool."""
    r = i * NF
    s[FREE] += req[r + NBLK] - req[r + HIT]
    if req[r + HIT] > 0:
        s[FREE] += group_release(grp, cfg, s, req[r + GROUP])
        req[r + HIT] = 0
    set_blocks(req, cfg, s, i, 0)
    s[SUM_COMP] -= req[r + COMP]
    req[r + COMP] = 0
    req[r + STAT] = new_stat
    s[NALIVE] -= 1
    s[REMOVED] = 1


@kernel
def preempt(req, q, grp, cfg, s, v):
    """v gives back this step's tokens and its blocks, and waits at its place."""
    if req[v * NF + SCHED] > 0:
        s[LEFT] += req[v * NF + SCHED]
        req[v * NF + SCHED] = 0  # stays in SCH; the commit skips it
    leave(req, grp, cfg, s, v, WAITING)
    if cfg[SHARED] > 0:
        group_evict(grp, cfg, s)
    heap_push(q, s, req[v * NF + KEY])
    s[PREEMPTED] += 1
    s[PREEMPTED_NOW] = 1


@kernel
def victim(req, q, s):
    """The running request with the largest key (lowest priority, newest)."""
    best = -1
    for k in range(s[NRUN]):
        i = q[k * NQ + RUN]
        if req[i * NF + STAT] == RUNNING and (best < 0 or req[i * NF + KEY]
                                               > req[best * NF + KEY]):
            best = i
    return best


# -- one step -----------------------------------------------------------------------------------
@kernel
def schedule_running(req, q, grp, cfg, s):
    """Each running request in admission order gets min(uncomputed, budget left) tokens,
    preempting the largest key while its blocks do not fit. (The budget, free blocks and
    schedule length are locals here, written back around each preemption: the hot loop.)"""
    bs = cfg[BS]
    left, free, nsch = s[LEFT], s[FREE], s[NSCH]
    s[COVERED] = 1
    for k in range(s[NRUN]):
        if left == 0:
            s[COVERED] = 0  # requests from k on get nothing: not in SCH
            break
        i = q[k * NQ + RUN]
        r = i * NF
        if req[r + STAT] != RUNNING:
            continue
        num = min(req[r + NTOK] - req[r + COMP], left)
        while True:
            over = req[r + COMP] + num - req[r + NBLK] * bs  # tokens beyond the table
            need = 0 if over <= 0 else (over + bs - 1) // bs  # a decode: 0 or 1 block
            if need <= free:
                if need > 0:
                    free -= need
                    set_blocks(req, cfg, s, i, req[r + NBLK] + need)
                    if cfg[SHARED] > 0:
                        s[FREE] = free
                        group_evict(grp, cfg, s)
                req[r + SCHED] = num
                q[nsch * NQ + SCH] = i
                nsch += 1
                left -= num
                break
            s[LEFT], s[FREE], s[NSCH] = left, free, nsch
            preempt(req, q, grp, cfg, s, victim(req, q, s))
            left, free, nsch = s[LEFT], s[FREE], s[NSCH]
            if req[r + STAT] != RUNNING:
                break
    s[LEFT], s[FREE], s[NSCH] = left, free, nsch


@kernel
def head_hits(grp, cfg, req, i):
    """Blocks of waiting request i's shared prefix that are cached now."""
    g = req[i * NF + GROUP]
    return cfg[SHARED] if cfg[SHARED] > 0 and g >= 0 and grp[g * NG + GCACHED] == 1 else 0


@kernel
def head_fits(req, grp, cfg, s, i, left):
    """Whether waiting request i's admission check passes with `left` tokens of budget:
    the blocks of all its tokens (full_prompt) or of its first chunk, plus revived ones."""
    bs, hits, g = cfg[BS], head_hits(grp, cfg, req, i), req[i * NF + GROUP]
    revive = hits if hits > 0 and grp[g * NG + GREF] == 0 else 0
    num = min(left, req[i * NF + NTOK] - hits * bs)
    need = cdiv(hits * bs + num, bs) - hits
    check = cdiv(req[i * NF + NTOK], bs) - hits if cfg[FULL] == 1 else need
    return check + revive <= s[FREE]


@kernel
def admit_head(req, q, grp, cfg, s, i):
    """Admit waiting request i if its blocks fit (prefix hits first); False if not."""
    bs, r = cfg[BS], i * NF
    g = req[r + GROUP]
    if not head_fits(req, grp, cfg, s, i, s[LEFT]):
        return False
    hits = head_hits(grp, cfg, req, i)
    num = min(s[LEFT], req[r + NTOK] - hits * bs)
    need = cdiv(hits * bs + num, bs) - hits
    heap_pop(q, s)
    if cfg[SHARED] > 0 and g >= 0:  # the group's blocks are the group's, not i's
        s[FREE] -= group_take(grp, cfg, s, g)
        req[r + HIT] = cfg[SHARED]
        if hits == 0:  # i computes them: all of them exist from now on
            need = max(need, cfg[SHARED])
    s[FREE] -= need
    if cfg[SHARED] > 0:
        group_evict(grp, cfg, s)
    req[r + COMP] = hits * bs
    s[SUM_COMP] += hits * bs
    set_blocks(req, cfg, s, i, hits + need)
    req[r + STAT] = RUNNING
    q[s[NRUN] * NQ + RUN] = i
    s[NRUN] += 1
    s[NALIVE] += 1
    req[r + SCHED] = num
    q[s[NSCH] * NQ + SCH] = i
    s[NSCH] += 1
    s[LEFT] -= num
    return True


@kernel
def schedule_waiting(req, q, grp, cfg, s):
    """FCFS by key while the budget lasts, fewer than max_num_seqs run and blocks fit."""
    if s[NHEAP] > 0 and s[LEFT] == 0:
        s[LAST_BUDGET] = s[T]  # the head waits for the token budget
    while s[NHEAP] > 0 and s[LEFT] > 0:
        if s[NALIVE] >= cfg[CAP]:
            s[LAST_CAP] = s[T]
            return
        i = q[HEAP] & MASK  # the head: slot 0
        if not admit_head(req, q, grp, cfg, s, i):
            s[LAST_MEM] = s[T]
            return
        if req[i * NF + SEEN] == 0:  # first admission: did it wait behind the head?
            req[i * NF + SEEN] = 1
            s[QMEM] += s[LAST_MEM] >= req[i * NF + ARRIVAL]
            s[QSEQS] += s[LAST_CAP] >= req[i * NF + ARRIVAL]
            s[QBUDGET] += s[LAST_BUDGET] >= req[i * NF + ARRIVAL]


@kernel
def assign_next(req, cfg, s, at):
    """Closed loop: a client got its answer; its next request arrives at step `at`."""
    if cfg[CLIENTS] > 0 and s[ASSIGNED] < s[NUM_REQ]:
        req[s[ASSIGNED] * NF + ARRIVAL] = at
        s[ASSIGNED] += 1


@kernel
def commit(req, q, grp, cfg, s):
    """The step's tokens are computed; a request at its last token samples one and
    finishes at `final` tokens. Returns the requests that ran.

    When the step was COVERED, SCH is RUN's running requests in admission order, then
    the admitted ones (a subsequence of RUN as `compact` leaves it): the same pass writes
    the requests still running back to RUN and their `decode_fin` to FIN_HINT."""
    ran = added = 0
    covered = s[COVERED] == 1
    nrun, fin = 0, NEVER
    for k in range(s[NSCH]):
        i = q[k * NQ + SCH]
        r = i * NF
        num = req[r + SCHED]
        if num > 0:  # else preempted after it was scheduled
            req[r + SCHED] = 0
            ran += 1
            req[r + COMP] += num
            added += num
            if req[r + COMP] == req[r + NTOK]:
                req[r + NTOK] += 1
                if req[r + NTOK] >= req[r + FINAL]:
                    s[SUM_COMP] += added
                    added = 0
                    leave(req, grp, cfg, s, i, DONE)
                    s[FINISHED] += 1
                    assign_next(req, cfg, s, s[T] + 1 + cfg[DELAY])
        if covered and req[r + STAT] == RUNNING:
            q[nrun * NQ + RUN] = i
            nrun += 1
            fin = min(fin, req[r + FINAL] - 2 - req[r + COMP]) \
                if req[r + NTOK] - req[r + COMP] == 1 else 0
    s[SUM_COMP] += added
    s[NSCH] = 0
    if covered:
        s[NRUN], s[REMOVED], s[FIN_HINT] = nrun, 0, fin
    return ran


@kernel
def compact(req, q, s):
    """Drop the requests that left from RUN, keeping admission order."""
    j = 0
    for k in range(s[NRUN]):
        i = q[k * NQ + RUN]
        if req[i * NF + STAT] == RUNNING:
            q[j * NQ + RUN] = i
            j += 1
    s[NRUN] = j
    s[REMOVED] = 0


@kernel
def step(req, q, grp, cfg, s):
    s[LEFT] = cfg[BUDGET]
    s[PREEMPTED_NOW] = 0
    s[FIN_HINT] = -1
    schedule_running(req, q, grp, cfg, s)
    if s[PREEMPTED_NOW] == 0:
        schedule_waiting(req, q, grp, cfg, s)
    ran = commit(req, q, grp, cfg, s)
    if s[REMOVED] == 1:
        compact(req, q, s)
    return ran


# -- steps that only decode, at once -------------------------------------------------------------
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
    may do more. Never with a timeline (rows per step)."""
    nrun, left = s[NALIVE], cfg[BUDGET] - s[NALIVE]
    if cfg[TIMELINE] == 1 or nrun == 0 or left < 0 or s[REMOVED] == 1:
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


# -- the loop ------------------------------------------------------------------------------------
@kernel
def arrive(req, q, cfg, s, i):
    """Queue i, or reject it: prompt >= max_model_len (then final <= prompt: max_tokens
    >= 1), or more blocks at its end than the pool holds."""
    final = req[i * NF + FINAL]
    if req[i * NF + P] >= final or cdiv(final, cfg[BS]) > cfg[NB]:
        req[i * NF + STAT] = DONE
        s[REJECTED] += 1
        assign_next(req, cfg, s, s[T] + cfg[DELAY])
        return
    req[i * NF + STAT] = WAITING
    heap_push(q, s, req[i * NF + KEY])


@kernel
def record(cfg, s, ran, tl):
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
def run(req, q, grp, cfg, s, tl):
    """Step until every request finished or was rejected; returns the timeline rows
    (tl keeps its owner: `record` may replace it)."""
    req, q, grp, cfg, s = view(req), view(q), view(grp), view(cfg), view(s)
    n = s[NUM_REQ]
    s[T] = req[ARRIVAL] if n > 0 else 0  # request 0's
    while True:
        while s[NXT] < n and req[s[NXT] * NF + ARRIVAL] <= s[T]:
            arrive(req, q, cfg, s, s[NXT])
            s[NXT] += 1
        if s[NALIVE] == 0 and s[NHEAP] == 0:
            if s[NXT] >= n or req[s[NXT] * NF + ARRIVAL] >= NEVER:
                return tl
            s[T] = req[s[NXT] * NF + ARRIVAL]
            continue
        span = span_length(req, q, grp, cfg, s)
        if span > 0:
            fast_forward(req, q, grp, cfg, s, span)
            continue
        ran = step(req, q, grp, cfg, s)
        if ran > 0:
            tl = record(cfg, s, ran, tl)
        s[T] += 1
