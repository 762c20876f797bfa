"""The sweep's load generators (sweep/loops.py) on the virtual clock: the same phases, the
same order of requests, the same rules, with seconds that are the model's.

Closed loop: C clients take the next conversation from one ordered feed; a turn follows
the previous one `think_s` after it ended; the warm-up phase ends before the measured one
starts; `least` stops the measured feed; `starts` delays client j (a ramp).
Open loop: each request at its offset from its phase's start; a later turn of a
conversation at its offset or `think_s` after the previous turn ended, whichever is later
(its arrival is then). Every time in the records is seconds since the level started.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from perfkit.predict.virtual_clock import VirtualClock
from perfkit.records import RequestRecord
from perfkit.sweep.loops import conversations, submitted_until
from perfkit.workload import RequestSpec

OnWarm = Callable[[], None]  # runs between the warm-up and the measured phase


def _nothing() -> None:
    pass


def closed_loop(clock: VirtualClock, specs: list[RequestSpec], concurrency: int,
                num_warmup: int, least: tuple[int, float] | None = None,
                starts: list[float] | None = None, on_warm: OnWarm = _nothing
                ) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    for phase, warmup in ((specs[:num_warmup], True), (specs[num_warmup:], False)):
        if not phase:
            continue
        feed = conversations(iter(phase) if warmup else
                             submitted_until(phase, least, clock.time))
        delays = [0.0] * concurrency if warmup or starts is None else starts
        for j in range(min(concurrency, len(phase))):
            clock.at(clock.now + delays[j], _Client(clock, feed, warmup, records).next)
        clock.run()
        if warmup:
            on_warm()
    return sorted(records, key=lambda r: r.request_id)


class _Client:
    """One closed-loop client: its conversation's turns in order, then the next one."""

    def __init__(self, clock: VirtualClock, feed: Iterator[list[RequestSpec]], warmup: bool,
                 records: list[RequestRecord]) -> None:
        self.clock, self.feed, self.warmup, self.records = clock, feed, warmup, records
        self.turns: list[RequestSpec] = []

    def next(self) -> None:
        if not self.turns:
            group = next(self.feed, None)
            if group is None:
                return
            self.turns = list(group)
            self._send()
            return
        spec = self.turns[0]
        if spec.think_s > 0:
            self.clock.at(self.clock.now + spec.think_s, self._send)
        else:
            self._send()

    def _send(self) -> None:
        self.clock.submit(self.turns.pop(0), self.warmup, None, self._ended)

    def _ended(self, record: RequestRecord) -> None:
        self.records.append(record)
        self.next()


def open_loop(clock: VirtualClock, specs: list[RequestSpec], num_warmup: int,
              on_warm: OnWarm = _nothing) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    ended: dict[tuple[int | None, int], float] = {}  # (conversation, turn) -> its end
    waiting: dict[tuple[int | None, int], tuple[RequestSpec, float, bool]] = {}

    def end_of(spec: RequestSpec, record: RequestRecord) -> None:
        records.append(record)
        if spec.conversation is None:
            return
        key = (spec.conversation, spec.turn)
        ended[key] = clock.now
        after = waiting.pop((spec.conversation, spec.turn + 1), None)
        if after is not None:
            nxt, arrival, warmup = after
            clock.at(clock.now + nxt.think_s,
                     lambda: send(nxt, max(arrival, clock.now), warmup))

    def send(spec: RequestSpec, arrival: float, warmup: bool) -> None:
        clock.submit(spec, warmup, arrival, lambda rec: end_of(spec, rec))

    def arrive(spec: RequestSpec, arrival: float, warmup: bool) -> None:
        previous = (spec.conversation, spec.turn - 1)
        if spec.conversation is not None and spec.turn > 0 and previous not in ended:
            waiting[(spec.conversation, spec.turn)] = (spec, arrival, warmup)
        else:
            send(spec, arrival, warmup)

    for phase, warmup in ((specs[:num_warmup], True), (specs[num_warmup:], False)):
        if not phase:
            continue
        start = clock.now - phase[0].arrival_s
        for spec in phase:
            when = start + spec.arrival_s
            clock.at(when, lambda s=spec, t=when, w=warmup: arrive(s, t, w))  # type: ignore[misc]
        clock.run()
        if warmup:
            on_warm()
    return records
