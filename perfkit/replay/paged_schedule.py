"""The scheduling pass of the paged replay's step (`paged_step`): `Scheduler.schedule`.

engine/scheduler.py is the model: running requests first, in admission order, each
preempting the largest key while its blocks do not fit; then the waiting queue's head
while the budget lasts, fewer than max_num_seqs run and its blocks fit (no overtaking).
A change here is a change there; tests/replay/test_conformance.py ties them.
"""

from __future__ import annotations

from perfkit.jit import kernel
from perfkit.replay.arrivals_kernel import ARRIVAL
from perfkit.replay.paged_blocks import (
    group_evict,
    group_take,
    head_fits,
    head_hits,
    head_need,
    heap_pop,
    heap_push,
    leave,
    note,
    set_blocks,
)
from perfkit.replay.paged_layout import (
    ADMIT,
    BS,
    CAP,
    COMP,
    COVERED,
    FREE,
    GROUP,
    HEAP,
    HIT,
    KEY,
    LAST_BUDGET,
    LAST_CAP,
    LAST_MEM,
    LEFT,
    MASK,
    NALIVE,
    NBLK,
    NF,
    NHEAP,
    NQ,
    NRUN,
    NSCH,
    NTOK,
    PREEMPT,
    PREEMPTED,
    PREEMPTED_NOW,
    QBUDGET,
    QMEM,
    QSEQS,
    RUN,
    RUNNING,
    SCH,
    SCHED,
    SEEN,
    SHARED,
    STAT,
    SUM_COMP,
    WAITING,
    T,
)


@kernel
def preempt(req, q, grp, cfg, s, lg, v):
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
    note(cfg, s, lg, PREEMPT, v, 0)


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


@kernel
def schedule_running(req, q, grp, cfg, s, lg):
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
            preempt(req, q, grp, cfg, s, lg, victim(req, q, s))
            left, free, nsch = s[LEFT], s[FREE], s[NSCH]
            if req[r + STAT] != RUNNING:
                break
    s[LEFT], s[FREE], s[NSCH] = left, free, nsch



@kernel
def admit_head(req, q, grp, cfg, s, lg, i):
    """Admit waiting request i if its blocks fit (prefix hits first); False if not."""
    bs, r = cfg[BS], i * NF
    g = req[r + GROUP]
    if not head_fits(req, grp, cfg, s, i, s[LEFT]):
        return False
    hits = head_hits(grp, cfg, req, i)
    num = min(s[LEFT], req[r + NTOK] - hits * bs)
    need = head_need(req, cfg, i, hits, num)
    heap_pop(q, s)
    if cfg[SHARED] > 0 and g >= 0:  # the group's blocks are the group's, not i's
        s[FREE] -= group_take(grp, cfg, s, g)
        req[r + HIT] = cfg[SHARED]
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
    note(cfg, s, lg, ADMIT, i, 0)
    return True


@kernel
def schedule_waiting(req, q, grp, cfg, s, lg):
    """FCFS by key while the budget lasts, fewer than max_num_seqs run and blocks fit."""
    if s[NHEAP] > 0 and s[LEFT] == 0:
        s[LAST_BUDGET] = s[T]  # the head waits for the token budget
    while s[NHEAP] > 0 and s[LEFT] > 0:
        if s[NALIVE] >= cfg[CAP]:
            s[LAST_CAP] = s[T]
            return
        i = q[HEAP] & MASK  # the head: slot 0
        if not admit_head(req, q, grp, cfg, s, lg, i):
            s[LAST_MEM] = s[T]
            return
        if req[i * NF + SEEN] == 0:  # first admission: did it wait behind the head?
            req[i * NF + SEEN] = 1
            s[QMEM] += s[LAST_MEM] >= req[i * NF + ARRIVAL]
            s[QSEQS] += s[LAST_CAP] >= req[i * NF + ARRIVAL]
            s[QBUDGET] += s[LAST_BUDGET] >= req[i * NF + ARRIVAL]
