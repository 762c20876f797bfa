"""The paged kernel's bookkeeping: the waiting queue, shared prefixes, a request's blocks.

Plain Python over the int64 arrays of `paged_layout` (compiled by numba with the rest of
the kernel, see `jit`). A request's table holds cdiv(comp, bs) blocks after a step, hit[i]
of them a shared prefix it does not own. Shared prefixes (SHARED > 0: prefix caching) are
whole groups of SHARED blocks: cached from the step a request of the group is admitted,
shared by gref[g] running requests, kept (and counted free) when released, evicted whole
and oldest first when the free blocks no longer cover them. With cfg[LOG], every
decision is a row of lg (`note`; `decisions` reads them).
"""

from __future__ import annotations

from perfkit.jit import kernel
from perfkit.replay.paged_layout import (
    BS,
    CACHED_FREE,
    COMP,
    FINAL,
    FREE,
    FULL,
    GCACHED,
    GREF,
    GROUP,
    HEAP,
    HIT,
    INTERNAL,
    LKIND,
    LNEXT,
    LOG,
    LPREV,
    LREQ,
    LT,
    LVAL,
    NALIVE,
    NBLK,
    NF,
    NG,
    NHEAP,
    NL,
    NLOG,
    NQ,
    NTOK,
    NUM_GROUPS,
    REMOVED,
    SAVED,
    SHARED,
    STAT,
    SUM_COMP,
    T,
)


@kernel
def cdiv(a, b):
    """config.units.cdiv, compiled with the kernel."""
    return -(-a // b)


# -- the waiting queue: a binary min-heap of keys in q[k * NQ + HEAP] ------------------
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


# -- shared prefixes, and whether the queue head fits --------------------------------
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


@kernel
def head_hits(grp, cfg, req, i):
    """Blocks of waiting request i's shared prefix that are cached now."""
    g = req[i * NF + GROUP]
    return cfg[SHARED] if cfg[SHARED] > 0 and g >= 0 and grp[g * NG + GCACHED] == 1 else 0


@kernel
def head_need(req, cfg, i, hits, num):
    """Blocks waiting request i takes at admission to compute `num` tokens after its
    `hits` cached ones: the first chunk's, and the whole shared prefix when i computes it
    (hits 0: the group's blocks all exist from then on, however short the chunk)."""
    need = cdiv(hits * cfg[BS] + num, cfg[BS]) - hits
    if cfg[SHARED] > 0 and req[i * NF + GROUP] >= 0 and hits == 0:
        need = max(need, cfg[SHARED])
    return need


@kernel
def head_fits(req, grp, cfg, s, i, left):
    """Whether waiting request i's admission check passes with `left` tokens of budget:
    the blocks of all its tokens (full_prompt) or those it takes now (`head_need`), plus
    revived ones."""
    bs, hits, g = cfg[BS], head_hits(grp, cfg, req, i), req[i * NF + GROUP]
    revive = hits if hits > 0 and grp[g * NG + GREF] == 0 else 0
    need = head_need(req, cfg, i, hits, min(left, req[i * NF + NTOK] - hits * bs))
    check = cdiv(req[i * NF + NTOK], bs) - hits if cfg[FULL] == 1 else need
    return check + revive <= s[FREE]


# -- one request's blocks --------------------------------------------------------------
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


# -- the decision log --------------------------------------------------------------------
@kernel
def note(cfg, s, lg, kind, i, value):
    """Log a decision of step T (cfg[LOG]); rows past lg's end are only counted."""
    if cfg[LOG] == 1:
        k = s[NLOG]
        if (k + 1) * NL <= len(lg):
            lg[k * NL + LT], lg[k * NL + LKIND] = s[T], kind
            lg[k * NL + LREQ], lg[k * NL + LVAL] = i, value
        s[NLOG] = k + 1
