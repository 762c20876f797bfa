"""The paged replay's step: `engine.scheduler.Scheduler` over block counts.

engine/scheduler.py is the model this mirrors: a change here is a change there;
tests/replay/test_conformance.py ties them (the Engine with the null executor and this
kernel, compiled and plain, decide alike at every step). One call of `step` is one
engine step, as `Scheduler.schedule` (`paged_schedule`) then `commit`:
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
  (min(prompt + max_tokens, max_model_len)) it finishes and frees its blocks, and its
  client's next request is assigned (`arrivals_kernel`).
"""

from __future__ import annotations

from perfkit.jit import kernel
from perfkit.replay import arrivals_kernel as arrivals
from perfkit.replay.arrivals import NEVER
from perfkit.replay.paged_blocks import (
    leave,
    note,
)
from perfkit.replay.paged_layout import (
    BUDGET,
    COMP,
    COVERED,
    DONE,
    FIN_HINT,
    FINAL,
    FINISH,
    FINISHED,
    LEFT,
    NF,
    NQ,
    NRUN,
    NSCH,
    NTOK,
    PREEMPTED_NOW,
    REMOVED,
    RUN,
    RUNNING,
    SCH,
    SCHED,
    SCHEDULE,
    STAT,
    SUM_COMP,
    T,
)
from perfkit.replay.paged_schedule import schedule_running, schedule_waiting


@kernel
def commit(req, q, grp, cfg, s, lg):
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
            note(cfg, s, lg, SCHEDULE, i, num)
            req[r + COMP] += num
            added += num
            if req[r + COMP] == req[r + NTOK]:
                req[r + NTOK] += 1
                if req[r + NTOK] >= req[r + FINAL]:
                    s[SUM_COMP] += added
                    added = 0
                    leave(req, grp, cfg, s, i, DONE)
                    s[FINISHED] += 1
                    note(cfg, s, lg, FINISH, i, 0)
                    arrivals.finished(req, NF, cfg, s, s[T])
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
def step(req, q, grp, cfg, s, lg):
    s[LEFT] = cfg[BUDGET]
    s[PREEMPTED_NOW] = 0
    s[FIN_HINT] = -1
    schedule_running(req, q, grp, cfg, s, lg)
    if s[PREEMPTED_NOW] == 0:
        schedule_waiting(req, q, grp, cfg, s, lg)
    ran = commit(req, q, grp, cfg, s, lg)
    if s[REMOVED] == 1:
        compact(req, q, s)
    return ran
