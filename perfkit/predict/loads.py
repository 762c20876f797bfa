"""The sweep's load generators on the virtual clock: the level's `ClientScript`
(perfkit/client_script.py: phases, the order of requests, turns, think time, ramp; the
script sweep/loops.py plays on asyncio) with seconds that are the model's. Here are only
the clock, the send and the end. Every time in the records is seconds since the level
started.
"""

from __future__ import annotations

from collections.abc import Callable

from perfkit.client_script import (
    Client,
    ClientScript,
    HeldTurns,
    phase_start,
    released_arrival,
)
from perfkit.predict.virtual_clock import VirtualClock
from perfkit.records import RequestRecord
from perfkit.workload import RequestSpec

OnWarm = Callable[[], None]  # runs between the warm-up and the measured phase


def _nothing() -> None:
    pass


def play(clock: VirtualClock, script: ClientScript,
         on_warm: OnWarm = _nothing) -> list[RequestRecord]:
    """The script's records: closed loop, or open loop when it has no clients."""
    if script.concurrency is None:
        return open_loop(clock, script, on_warm)
    return closed_loop(clock, script, on_warm)


def closed_loop(clock: VirtualClock, script: ClientScript,
                on_warm: OnWarm = _nothing) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    for phase in script.phases:
        if not phase.specs:
            continue
        for delay, one in script.clients(phase, clock.time):
            clock.at(clock.now + delay, _Client(clock, one, phase.warmup, records).next)
        clock.run()
        if phase.warmup:
            on_warm()
    return sorted(records, key=lambda r: r.request_id)


class _Client:
    """One closed-loop client on the clock: the script's next request, think time later."""

    def __init__(self, clock: VirtualClock, script: Client, warmup: bool,
                 records: list[RequestRecord]) -> None:
        self.clock, self.script, self.warmup, self.records = clock, script, warmup, records

    def next(self) -> None:
        step = self.script.next()
        if step is None:
            return
        spec, think_s = step
        if think_s > 0:
            self.clock.at(self.clock.now + think_s, lambda: self._send(spec))
        else:
            self._send(spec)

    def _send(self, spec: RequestSpec) -> None:
        self.clock.submit(spec, self.warmup, None, self._ended)

    def _ended(self, record: RequestRecord) -> None:
        self.records.append(record)
        self.next()


def open_loop(clock: VirtualClock, script: ClientScript,
              on_warm: OnWarm = _nothing) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    held: HeldTurns[tuple[RequestSpec, float, bool]] = HeldTurns(script.specs)

    def end_of(spec: RequestSpec, record: RequestRecord) -> None:
        records.append(record)
        after = held.end(spec)
        if after is not None:
            nxt, arrival, warmup = after
            clock.at(clock.now + nxt.think_s,
                     lambda: send(nxt, released_arrival(arrival, clock.now), warmup))

    def send(spec: RequestSpec, arrival: float, warmup: bool) -> None:
        clock.submit(spec, warmup, arrival, lambda rec: end_of(spec, rec))

    def arrive(spec: RequestSpec, arrival: float, warmup: bool) -> None:
        if held.waits(spec):
            held.hold(spec, (spec, arrival, warmup))
        else:
            send(spec, arrival, warmup)

    for phase in script.phases:
        if not phase.specs:
            continue
        start = phase_start(phase, clock.now)
        for spec in phase.specs:
            when = start + spec.arrival_s
            clock.at(when, lambda s=spec, t=when, w=phase.warmup: arrive(s, t, w))  # type: ignore[misc]
        clock.run()
        if phase.warmup:
            on_warm()
    return records
