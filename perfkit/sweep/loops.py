"""Load generators: closed loop (C clients) and open loop (arrivals at a rate).

Closed loop: each client submits its next request when its previous one ends.
Open loop: each request is submitted at its arrival offset, whatever is in flight;
its arrival time is the intended one, so a late submission counts as queueing.
Times in the records are seconds since the level started (perfkit.clock: perf_counter
less lockstep pauses).

Both drive a `Serve`: one request in, its `RequestRecord` out. `EngineServe` serves
from the in-process AsyncEngine; perfkit.remote serves over HTTP from any
OpenAI-compatible server. The generators do not know which.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

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


def submitted_until(specs: list[RequestSpec], least: tuple[int, float] | None,
                    clock: Callable[[], float] = now) -> Iterator[RequestSpec]:
    """The specs in order; with `least` (count, seconds), none after both are reached
    (seconds on `clock`, from the first spec taken: the predictor's is virtual)."""
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


async def closed_loop(serve: Serve, specs: list[RequestSpec], concurrency: int,
                      num_warmup: int, on_record: OnRecord = _ignore,
                      on_warm: OnWarm = _nothing,
                      least: tuple[int, float] | None = None,
                      starts: list[float] | None = None,
                      pacing: Pacing | None = None) -> list[RequestRecord]:
    """`concurrency` clients take the next spec from a shared, ordered queue.

    The first `num_warmup` specs run as a phase of their own, at the same concurrency,
    and end before any measured request is submitted: nothing measured overlaps the
    warm-up, and every one of the remaining specs is measured. `on_warm` runs between.
    `least` = (count, seconds): the measured phase submits its specs in order and stops
    once it has submitted `count` and lasted `seconds` (the rest are never sent).
    A multi-turn conversation is one client's: its turns in order, each `think_s` after
    the previous one ended. `starts`: client j of the measured phase starts starts[j]
    seconds in (a ramp); the warm-up starts them all at once. `pacing`: arrivals are
    scheduled sends, phases start at the gate's origin.
    """
    records: list[RequestRecord] = []
    t0 = None if pacing is None else pacing.t0
    halted = (lambda: False) if pacing is None else pacing.halted

    async def client(feed: Iterator[list[RequestSpec]], warmup: bool, due: float) -> None:
        await _sleep_until(due)
        for turns in feed:
            for i, spec in enumerate(turns):
                if halted():
                    return
                if i and spec.think_s > 0:
                    await asyncio.sleep(spec.think_s)
                    due += spec.think_s
                record = await serve(spec, warmup, None if t0 is None else due - t0)
                records.append(record)
                on_record(record)
                due = now() if record.finish_s is None or t0 is None else record.finish_s + t0

    for phase, warmup in ((specs[:num_warmup], True), (specs[num_warmup:], False)):
        origin = await _origin(pacing, warmup, now())
        feed = conversations(iter(phase) if warmup else submitted_until(phase, least))
        delays = [0.0] * concurrency if warmup or starts is None else starts
        await asyncio.gather(*(client(feed, warmup, origin + delays[j])
                               for j in range(min(concurrency, len(phase)))))
        if warmup:
            await _warm_done(on_warm)
    return sorted(records, key=lambda r: r.request_id)


async def open_loop(serve: Serve, specs: list[RequestSpec], num_warmup: int,
                    t0: float, on_record: OnRecord = _ignore,
                    on_warm: OnWarm = _nothing,
                    pacing: Pacing | None = None) -> list[RequestRecord]:
    """Submit each spec at its arrival offset (specs carry the rate's offsets).

    As in the closed loop, the warm-up specs run first and end before the measured
    phase; the measured arrivals then start over from the phase's start (offsets
    relative to the first measured spec), so every measured request is measured.
    A later turn of a conversation arrives at its offset or `think_s` after the previous
    turn ended, whichever is later (its arrival time is then). With a gate (`pacing`),
    each phase starts at its origin and the offsets are the coordinator's re-based ones.
    """
    ended: dict[tuple[int | None, int], asyncio.Event] = {
        (s.conversation, s.turn): asyncio.Event() for s in specs if s.conversation is not None}

    halted = (lambda: False) if pacing is None else pacing.halted

    async def one(spec: RequestSpec, start: float, warmup: bool) -> RequestRecord | None:
        delay = start + spec.arrival_s - now()
        if delay > 0:
            await asyncio.sleep(delay)
        arrival = start + spec.arrival_s
        previous = ended.get((spec.conversation, spec.turn - 1))
        if previous is not None and not previous.is_set():
            await previous.wait()
            await asyncio.sleep(spec.think_s)
            arrival = max(arrival, now())
        if halted():
            if spec.conversation is not None:  # its later turns must not wait for it
                ended[(spec.conversation, spec.turn)].set()
            return None
        record = await serve(spec, warmup, arrival - t0)
        if spec.conversation is not None:
            ended[(spec.conversation, spec.turn)].set()
        on_record(record)
        return record

    records: list[RequestRecord] = []
    for phase, warmup in ((specs[:num_warmup], True), (specs[num_warmup:], False)):
        if not phase and (pacing is None or pacing.gate is None):
            continue
        start = await _origin(pacing, warmup, now() - (phase[0].arrival_s if phase else 0.0))
        sent = await asyncio.gather(*(one(s, start, warmup) for s in phase))
        records += [r for r in sent if r is not None]
        if warmup:
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
    if level.concurrency is not None:
        clients = level.concurrency if concurrency is None else concurrency
        return await closed_loop(serve, specs, clients, num_warmup, on_record,
                                 on_warm, least, client_starts(clients, *ramp), pacing)
    return await open_loop(serve, specs, num_warmup, t0, on_record, on_warm, pacing)
