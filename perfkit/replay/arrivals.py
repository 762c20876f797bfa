"""The arrival rule every replay consumes, in plain Python (`arrivals_kernel` compiles it).

Arrivals are in engine steps. `OpenLoop(steps)`: request i waits from step steps[i]
(nondecreasing). `ClosedLoop(clients, delay)`: the first `clients` requests arrive at
step 0; a request finishing in step t makes the next request (in order) arrive at
t + 1 + delay, a rejected one at t + delay. A request not yet assigned arrives at NEVER.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

NEVER = 1 << 62  # a step no replay reaches: an arrival not yet assigned (every replay's)


@dataclass(frozen=True)
class OpenLoop:
    """Arrivals fixed in advance."""

    steps: tuple[int, ...]  # request i's first waiting step; nondecreasing


@dataclass(frozen=True)
class ClosedLoop:
    """`clients` clients, each sending its next request `delay` steps after its answer's
    step + 1 (a real client's round trip), or after a rejection's step."""

    clients: int
    delay: int = 0

    def __post_init__(self) -> None:
        if self.clients < 1:
            raise ValueError("a closed loop needs at least one client")
        if self.delay < 0:
            raise ValueError("a closed loop's client delay is >= 0 steps")


ArrivalRule = OpenLoop | ClosedLoop


def open_loop(steps: Sequence[int]) -> OpenLoop:
    return OpenLoop(tuple(steps))


def first_steps(rule: ArrivalRule, num: int) -> list[int]:
    """The arrival step of each of `num` requests before any is answered."""
    if isinstance(rule, OpenLoop):
        if len(rule.steps) != num:
            raise ValueError(f"{len(rule.steps)} arrival steps for {num} requests")
        return list(rule.steps)
    return [0 if i < rule.clients else NEVER for i in range(num)]


class ArrivalClock:
    """The rule as a replay runs it: `step[i]`, assigned as answers come."""

    def __init__(self, rule: ArrivalRule, num: int) -> None:
        self.step = first_steps(rule, num)
        self._delay, self._assigned = 0, num  # open: nothing left to assign
        if isinstance(rule, ClosedLoop):
            self._delay, self._assigned = rule.delay, min(rule.clients, num)

    def finished(self, t: int) -> None:
        """A request finished in step t: its client's next request comes."""
        self._answer(t + 1 + self._delay)

    def rejected(self, t: int) -> None:
        """A request was rejected at step t."""
        self._answer(t + self._delay)

    def _answer(self, at: int) -> None:
        if self._assigned < len(self.step):
            self.step[self._assigned] = at
            self._assigned += 1


def drive(rule: ArrivalRule, num: int, add: Callable[[int, int], bool],
          has_work: Callable[[], bool], step: Callable[[int, bool], int]) -> int:
    """Submit request i at its arrival step (add(i, t) says whether it was rejected), call
    step(t, more_arrivals) at every step with work (it returns the requests that
    finished), jump over idle gaps. Returns the number of rejections."""
    clock = ArrivalClock(rule, num)
    arrival = clock.step
    rejected = nxt = 0
    t = arrival[0] if num else 0
    while nxt < num or has_work():
        while nxt < num and arrival[nxt] <= t:
            if add(nxt, t):
                rejected += 1
                clock.rejected(t)
            nxt += 1
        if not has_work():
            if nxt >= num or arrival[nxt] >= NEVER:
                break
            t = arrival[nxt]
            continue
        for _ in range(step(t, nxt < num)):
            clock.finished(t)
        t += 1
    return rejected
