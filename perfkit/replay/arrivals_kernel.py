"""The arrival rule compiled (`arrivals.ArrivalClock` in plain Python; a change here is a
change there, tests/replay/test_conformance.py ties them): every kernel keeps the rule
as data at the same places, so both replays (paged_kernel, fragmentation's
contiguous_kernel) call these functions on their own arrays.

    cfg[CLIENTS], cfg[DELAY]       the rule: 0 clients is an open loop (arrivals given)
    s[ASSIGNED], s[NXT], s[NUM_REQ] requests with an arrival step, arrived, in all
    req[i * nf + ARRIVAL]           request i's arrival step (NEVER: not assigned yet)
"""

from __future__ import annotations

import numpy as np

from perfkit.jit import kernel
from perfkit.replay.arrivals import NEVER, ArrivalRule, ClosedLoop, first_steps

CLIENTS, DELAY = 0, 1  # cfg's first fields, in every kernel
ASSIGNED, NXT, NUM_REQ = 0, 1, 2  # s's first fields
ARRIVAL = 0  # a request row's first field


def rule_fields(rule: ArrivalRule) -> tuple[int, int]:
    """(cfg[CLIENTS], cfg[DELAY]) of a rule."""
    return (rule.clients, rule.delay) if isinstance(rule, ClosedLoop) else (0, 0)


def first_column(rule: ArrivalRule, num: int) -> np.ndarray:
    """req[:, ARRIVAL] before any answer; s[ASSIGNED] is `assigned_at_start`."""
    return np.asarray(first_steps(rule, num), np.int64)


def assigned_at_start(rule: ArrivalRule, num: int) -> int:
    return min(rule.clients, num) if isinstance(rule, ClosedLoop) else num


@kernel
def answer(req, nf, cfg, s, at):
    """Closed loop: a client got its answer; its next request arrives at step `at`."""
    if cfg[CLIENTS] > 0 and s[ASSIGNED] < s[NUM_REQ]:
        req[s[ASSIGNED] * nf + ARRIVAL] = at
        s[ASSIGNED] += 1


@kernel
def finished(req, nf, cfg, s, t):
    """A request finished in step t."""
    answer(req, nf, cfg, s, t + 1 + cfg[DELAY])


@kernel
def rejected(req, nf, cfg, s, t):
    """A request was rejected at step t."""
    answer(req, nf, cfg, s, t + cfg[DELAY])


@kernel
def due(req, nf, s, t):
    """The next request has arrived by step t."""
    return s[NXT] < s[NUM_REQ] and req[s[NXT] * nf + ARRIVAL] <= t


@kernel
def next_arrival(req, nf, s):
    """The next request's arrival step; NEVER when none is left or assigned."""
    if s[NXT] >= s[NUM_REQ]:
        return NEVER
    return req[s[NXT] * nf + ARRIVAL]
