"""The paged kernel's arrays (paged_kernel, paged_step, paged_blocks, paged_span).

Every array is int64 and flat, rows of fields: request i's field F is req[i * NF + F],
queue slot k's q[k * NQ + Q], group g's grp[g * NG + G]; cfg holds the pool and the
rules, s the state and the results (read by `paged`), lg the decision log. One array per
kind, and no tuples of arrays: compiled, each array a function touches costs a reference
count, so a step passes six of them, not thirty (and `run` views them without their
owner, `jit.unowned`, so a count is a null check, not an atomic add). The arrival rule's
fields come first in cfg, s and req: `arrivals_kernel` names them.
"""

from __future__ import annotations

# cfg: the arrival rule, the pool and the rules; TIMELINE: a (blocks, slots used) row per
# step; LOG: the decisions in lg (both step one at a time: no decode-only spans)
NB, BS, CAP, BUDGET, FULL, SHARED, TIMELINE, LOG, NUM_CFG = range(2, 11)
# req: per request. ARRIVAL step, P prompt, FINAL tokens at the end, KEY queue order, GROUP
# prefix or -1; NTOK tokens, COMP computed, NBLK table blocks, HIT shared blocks held,
# STAT (UNSEEN, WAITING, RUNNING, DONE), SCHED tokens this step, SEEN admitted before
P, FINAL, KEY, GROUP, NTOK, COMP, NBLK, HIT, STAT, SCHED, SEEN, NF = range(1, 13)
UNSEEN, WAITING, RUNNING, DONE = range(4)
# q: HEAP of waiting keys, RUN requests in admission order, SCH scheduled this step
HEAP, RUN, SCH, NQ = range(4)
# grp: GREF running sharers, GCACHED, LNEXT/LPREV the released groups oldest first
# (a ring through the sentinel row at index num_groups)
GREF, GCACHED, LNEXT, LPREV, NG = range(5)
# s: the arrival rule's state, then the state, then results (read by `paged`).
(T, FREE, NRUN, NALIVE, NHEAP, NSCH, LEFT, PREEMPTED_NOW, REMOVED, SUM_COMP, INTERNAL,
 SAVED, CACHED_FREE, LAST_MEM, LAST_CAP, NUM_GROUPS,
 STEPS, FINISHED, REJECTED, PREEMPTED, QMEM, QSEQS, PEAK_SEQS,
 SUM_USED, SUM_RES, SUM_INT, SUM_FREE, PEAK_USED, PEAK_RES, PEAK_INT, PEAK_FREE,
 PEAK_STEP, PEAK_OCC, SUM_SAVED, PEAK_SAVED, NTL, LAST_BUDGET, QBUDGET, COVERED,
 FIN_HINT, NLOG, NUM_SCALARS) = range(3, 45)
# COVERED: the step's budget lasted to RUN's last request, so SCH lists every request
# running after it (always so far: only the newest has more than a token to compute; a
# guard). FIN_HINT: `decode_fin` of the running requests as they are now; -1: not known.
# NLOG: decisions logged (past len(lg) // NL only counted: the caller grows lg, reruns).
MASK = (1 << 32) - 1  # key & MASK = the request

# lg: one row per decision, (step, kind, request, value): the request ARRIVEs or is
# REJECTed; is ADMITted (again after a preemption); SCHEDULEd `value` tokens; PREEMPTed;
# FINISHes; STEP: a step that ran requests ends with `value` blocks used (request: -1)
LT, LKIND, LREQ, LVAL, NL = range(5)
ARRIVE, REJECT, ADMIT, SCHEDULE, PREEMPT, FINISH, STEP = range(7)
