"""Load generators on asyncio: closed loop (C clients) and open loop (arrivals at a rate).

Which request goes next and when is the level's `ClientScript` (perfkit/client_script.py,
which predict/loads.py plays on the virtual clock too); here are only the clock, the send
and the wait for the end. Closed loop: each client submits its next request when its
previous one ends. Open loop: each request is submitted at its arrival offset, whatever is
in flight; its arrival time is the intended one, so a late submission counts as queueing.
Times in the records are seconds since the level started (perfkit.clock: perf_counter
less lockstep pauses).

Both drive a `Serve`: one request in, its `RequestRecord` out. `EngineServe` serves
from the in-process AsyncEngine; perfkit.remote serves over HTTP from any
OpenAI-compatible server. The generators do not know which.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from perfkit.client_script import (
    Client,
    ClientScript,
    HeldTurns,
    level_script,
    phase_start,
    released_arrival,
)
from perfkit.clock import now
from perfkit.records import RequestRecord
from perfkit.result.point import LoadPoint
from perfkit.workload import RequestSpec

if TYPE_CHECKING:  # a load-generating worker process imports this module without the engine
    from perfkit.engine.async_engine import AsyncEngine


class Serve(Protocol):
    """Serve one request to its end and record it. `arrival_s` (level-relative) is the
    intended arrival of an open-loop request; None means "now" (closed loop)."""

    async def __call__(self, spec: RequestSpec, warmup: bool,
                       arrival_s: float | None = None) -> RequestRecord: ...


class EngineServe:
    """Serve from the in-process AsyncEngine; t0 is the level's clock origin."""

    def __init__(self, aeng: AsyncEngine, t0: float) -> None:
        self.aeng = aeng
        self.t0 = t0

    async def __call__(self, spec: RequestSpec, warmup: bool,
                       arrival_s: float | None = None) -> RequestRecord:
        t0 = self.t0
        submitted = now() - t0
        stream = self.aeng.submit(spec)
        rec = RequestRecord(
            request_id=spec.request_id, arrival_s=submitted if arrival_s is None else arrival_s,
            prompt_tokens=len(spec.prompt), output_tokens=0, rejected=stream.rejected,
            warmup=warmup,
        )
        rec.num_outputs = max(spec.n, spec.beam_width)
        times = [rec.token_times_s] + [[] for _ in range(rec.num_outputs - 1)]
        async for event in stream:
            times[event.index].append(event.time_s - t0)
        rec.more_token_times_s = times[1:]
        seq = stream.seq
        rec.output_tokens = sum(len(t) for t in times)
        if rec.output_tokens:
            rec.first_token_s = min(t[0] for t in times if t)
        rec.finish_s = now() - t0 if stream.rejected is None else None
        if rec.output_tokens and seq.finish_reason is not None:
            rec.finish_s = max(t[-1] for t in times if t)
        if seq.first_scheduled_s is not None:
            rec.scheduled_s = seq.first_scheduled_s - t0
        rec.cached_tokens = seq.num_cached_tokens
        rec.num_preemptions = seq.num_preemptions
        rec.finish_reason = seq.finish_reason if stream.rejected is None else "rejected"
        return rec


OnRecord = Callable[[RequestRecord], None]
# Runs between the warm-up and the measured phase; may return an awaitable (awaited
# before the first measured request is submitted).
OnWarm = Callable[[], Awaitable[None] | None]


class PhaseGate(Protocol):
    """Where the phases of a level meet other load generators (worker processes).

    `begin` returns when every worker is ready for the phase (warm-up first, then the
    measured one) with the phase's origin on this process's perf_counter: a moment all
    of them share. Open-loop arrivals are offsets from it (the coordinator re-bases them
    so that the level's first arrival of the phase is 0), closed-loop clients start at
    it (plus their ramp)."""

    async def begin(self, warmup: bool) -> float: ...


@dataclass(frozen=True)
class Pacing:
    """A client that keeps its own schedule: each request's arrival_s is when it was due
    (closed loop: when its client's previous request ended, or the phase's start), so a
    late send counts in its latency and shows as the client's queue (sent_s - arrival_s).
    t0 is the level's clock origin; `gate` joins the phases of several workers."""

    t0: float
    gate: PhaseGate | None = None
    halted: Callable[[], bool] = lambda: False  # True: send nothing more (target down)


async def _origin(pacing: Pacing | None, warmup: bool, default: float) -> float:
    if pacing is None or pacing.gate is None:
        return default
    return await pacing.gate.begin(warmup)


async def _sleep_until(t: float) -> None:
    delay = t - now()
    if delay > 0:
        await asyncio.sleep(delay)


def _ignore(record: RequestRecord) -> None:
    pass


def _nothing() -> None:
    pass


async def _warm_done(on_warm: OnWarm) -> None:
    result = on_warm()
    if inspect.isawaitable(result):
        await result


async def closed_loop(serve: Serve, script: ClientScript, on_record: OnRecord = _ignore,
                      on_warm: OnWarm = _nothing,
                      pacing: Pacing | None = None) -> list[RequestRecord]:
    """The script's clients (client_script.py: phases, feed, turns, ramp), each sending its
    next request when its previous one ends. `on_warm` runs between the phases.
    `pacing`: arrivals are scheduled sends, phases start at the gate's origin.
    """
    records: list[RequestRecord] = []
    t0 = None if pacing is None else pacing.t0
    halted = (lambda: False) if pacing is None else pacing.halted

    async def client(one: Client, warmup: bool, due: float) -> None:
        await _sleep_until(due)
        while (step := one.next()) is not None:
            spec, think_s = step
            if halted():
                return
            if think_s > 0:
                await asyncio.sleep(think_s)
                due += think_s
            record = await serve(spec, warmup, None if t0 is None else due - t0)
            records.append(record)
            on_record(record)
            due = now() if record.finish_s is None or t0 is None else record.finish_s + t0

    for phase in script.phases:
        origin = await _origin(pacing, phase.warmup, now())
        await asyncio.gather(*(client(one, phase.warmup, origin + delay)
                               for delay, one in script.clients(phase, now)))
        if phase.warmup:
            await _warm_done(on_warm)
    return sorted(records, key=lambda r: r.request_id)


async def open_loop(serve: Serve, script: ClientScript, t0: float,
                    on_record: OnRecord = _ignore, on_warm: OnWarm = _nothing,
                    pacing: Pacing | None = None) -> list[RequestRecord]:
    """Each spec at its arrival offset from its phase's start, a held later turn when its
    previous one ended (client_script.py). With a gate (`pacing`), each phase starts at its
    origin and the offsets are the coordinator's re-based ones.
    """
    held: HeldTurns[asyncio.Future[None]] = HeldTurns(script.specs)
    halted = (lambda: False) if pacing is None else pacing.halted

    def ended(spec: RequestSpec) -> None:
        after = held.end(spec)
        if after is not None:
            after.set_result(None)

    async def one(spec: RequestSpec, start: float, warmup: bool) -> RequestRecord | None:
        arrival = start + spec.arrival_s
        await _sleep_until(arrival)
        if held.waits(spec):
            previous: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            held.hold(spec, previous)
            await previous
            await asyncio.sleep(spec.think_s)
            arrival = released_arrival(arrival, now())
        if halted():
            ended(spec)  # its later turns must not wait for it
            return None
        record = await serve(spec, warmup, arrival - t0)
        ended(spec)
        on_record(record)
        return record

    records: list[RequestRecord] = []
    for phase in script.phases:
        if not phase.specs and (pacing is None or pacing.gate is None):
            continue
        start = await _origin(pacing, phase.warmup, phase_start(phase, now()))
        sent = await asyncio.gather(*(one(s, start, phase.warmup) for s in phase.specs))
        records += [r for r in sent if r is not None]
        if phase.warmup:
            await _warm_done(on_warm)
    return records


async def drive(serve: Serve, specs: list[RequestSpec], level: LoadPoint, num_warmup: int,
                t0: float, on_record: OnRecord, on_warm: OnWarm,
                least: tuple[int, float] | None = None,
                ramp: tuple[str, float] = ("none", 0.0),
                pacing: Pacing | None = None, concurrency: int | None = None
                ) -> list[RequestRecord]:
    """One level's load through `serve`, closed or open loop as the level says; `least`
    (requests, seconds): a closed loop stops submitting once both are reached; `ramp`
    (kind, seconds): its clients start over that time (open loops ramp in their specs).
    `concurrency`: this load generator's share of the level's clients (a worker's)."""
    clients = level.concurrency
    if clients is not None and concurrency is not None:
        clients = concurrency  # this load generator's share
    script = level_script(specs, num_warmup, clients, least, ramp)
    if script.concurrency is not None:
        return await closed_loop(serve, script, on_record, on_warm, pacing)
    return await open_loop(serve, script, t0, on_record, on_warm, pacing)
