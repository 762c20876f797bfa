"""What a level's clients send and when, whatever the clock: the one copy of the arrival
rules. sweep/loops.py plays a script on asyncio (in-process and remote), predict/loads.py
on the virtual clock; each loop is only its clock, its send and its wait for the end.

    phases     the warm-up specs, then the measured ones; the warm-up ends before the
               measured phase starts (nothing measured overlaps it)
    closed     C clients take the next conversation from one ordered feed (a free client
               takes it); a conversation's turns go in order, each `think_s` after the
               previous one ended; the measured phase's client j starts starts[j] s in (a
               ramp; the warm-up starts them all at once); `least` (count, seconds) stops
               the measured feed once both are reached
    open       each spec arrives at its offset from its phase's start; a later turn whose
               previous turn has not ended by then is held, and arrives `think_s` after
               that end (its arrival is then)

Standard library only (and the request type): a load-generating worker imports it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from perfkit.workload import RequestSpec

Clock = Callable[[], float]  # seconds, live or virtual
TurnKey = tuple[int | None, int]  # (conversation, turn)
T = TypeVar("T")


@dataclass(frozen=True)
class Phase:
    specs: list[RequestSpec]  # in level order
    warmup: bool  # the warm-up phase: its records are left out of every metric


@dataclass(frozen=True)
class ClientScript:
    """One level's load as its clients play it (one load generator's share of it)."""

    specs: list[RequestSpec]  # warm-up specs, then measured ones; open loop: with offsets
    num_warmup: int
    concurrency: int | None  # closed loop: its clients; None: open loop
    least: tuple[int, float] | None = None  # closed loop: measured (count, seconds) at least
    starts: list[float] | None = None  # closed loop: client j's start in the measured phase

    @property
    def phases(self) -> tuple[Phase, Phase]:
        return (Phase(self.specs[:self.num_warmup], True),
                Phase(self.specs[self.num_warmup:], False))

    def clients(self, phase: Phase, clock: Clock) -> list[tuple[float, Client]]:
        """Closed loop: the phase's clients, each with its start (seconds after the phase's),
        all taking from one feed; `clock` times `least`."""
        assert self.concurrency is not None, "an open-loop script has no clients"
        if phase.warmup:
            feed, delays = conversations(iter(phase.specs)), [0.0] * self.concurrency
        else:
            feed = conversations(submitted_until(phase.specs, self.least, clock))
            delays = [0.0] * self.concurrency if self.starts is None else self.starts
        return [(delays[j], Client(feed)) for j in range(min(self.concurrency, len(phase.specs)))]


def level_script(specs: list[RequestSpec], num_warmup: int, concurrency: int | None,
                 least: tuple[int, float] | None = None,
                 ramp: tuple[str, float] = ("none", 0.0)) -> ClientScript:
    """A level's script: closed loop with `concurrency` clients (their ramp: (kind, seconds),
    `least`), or open loop (None: the specs carry their offsets, ramped in already)."""
    if concurrency is None:
        return ClientScript(specs, num_warmup, None)
    return ClientScript(specs, num_warmup, concurrency, least, client_starts(concurrency, *ramp))


class Client:
    """One closed-loop client: a conversation's turns in order, then the next from the feed."""

    def __init__(self, feed: Iterator[list[RequestSpec]]) -> None:
        self._feed = feed
        self._turns: list[RequestSpec] = []  # the conversation's turns not sent yet

    def next(self) -> tuple[RequestSpec, float] | None:
        """The next request and the seconds to wait before sending it (its think time,
        counted from the previous request's end); None: the feed is done."""
        if not self._turns:
            group = next(self._feed, None)
            if group is None:
                return None
            self._turns = list(group)
            return self._turns.pop(0), 0.0
        spec = self._turns.pop(0)
        return spec, spec.think_s


def phase_start(phase: Phase, now: float) -> float:
    """Open loop: the phase's origin, so that its first spec arrives `now`."""
    return now - (phase.specs[0].arrival_s if phase.specs else 0.0)


def released_arrival(scheduled: float, now: float) -> float:
    """Open loop: a held turn, released `think_s` after its previous turn ended at `now`,
    arrives then (its scheduled arrival passed while it was held)."""
    return max(scheduled, now)


class HeldTurns(Generic[T]):
    """Open loop: the later turns that arrived before their previous turn ended. `T` is
    what the loop needs to send one later (a future, a callback's arguments)."""

    def __init__(self, specs: list[RequestSpec]) -> None:
        self._unended = {(s.conversation, s.turn) for s in specs if s.conversation is not None}
        self._held: dict[TurnKey, T] = {}

    def waits(self, spec: RequestSpec) -> bool:
        """True when its previous turn is in the script and has not ended."""
        return spec.conversation is not None and (spec.conversation, spec.turn - 1) in self._unended

    def hold(self, spec: RequestSpec, token: T) -> None:
        self._held[(spec.conversation, spec.turn)] = token

    def end(self, spec: RequestSpec) -> T | None:
        """The spec ended (or will never be sent): its next turn's token if that was held,
        to send `think_s` later."""
        self._unended.discard((spec.conversation, spec.turn))
        return self._held.pop((spec.conversation, spec.turn + 1), None)


def submitted_until(specs: list[RequestSpec], least: tuple[int, float] | None,
                    clock: Clock) -> Iterator[RequestSpec]:
    """The specs in order; with `least` (count, seconds), none after both are reached
    (seconds on `clock`, from the first spec taken)."""
    start = clock()
    for i, spec in enumerate(specs):
        if least is not None and i >= least[0] and clock() - start >= least[1]:
            return
        yield spec


def conversations(specs: Iterator[RequestSpec]) -> Iterator[list[RequestSpec]]:
    """Consecutive turns of one conversation as one item (a client sends them in order);
    every other spec alone."""
    group: list[RequestSpec] = []
    for spec in specs:
        if group and (spec.conversation is None or spec.conversation != group[0].conversation
                      or spec.turn == 0):
            yield group
            group = []
        group.append(spec)
    if group:
        yield group


def client_starts(concurrency: int, ramp: str, ramp_s: float) -> list[float] | None:
    """Seconds after the measured phase starts at which each client starts: all at once,
    evenly over ramp_s (linear), or doubling the clients every equal share of it
    (exponential: client j at ramp_s * log2(j + 1) / log2(C))."""
    if ramp == "none" or ramp_s <= 0 or concurrency < 2:
        return None
    if ramp == "linear":
        return [ramp_s * j / concurrency for j in range(concurrency)]
    return [ramp_s * math.log2(j + 1) / math.log2(concurrency) for j in range(concurrency)]
