"""Load generators: closed loop (C clients) and open loop (arrivals at a rate).

Closed loop: each client submits its next request when its previous one ends.
Open loop: each request is submitted at its arrival offset, whatever is in flight;
its arrival time is the intended one, so a late submission counts as queueing.
Times in the records are seconds since the level started (perf_counter).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

from perfkit.engine.async_engine import AsyncEngine
from perfkit.records import RequestRecord
from perfkit.workload import RequestSpec


async def _serve(aeng: AsyncEngine, spec: RequestSpec, warmup: bool, t0: float,
                 arrival: float | None = None) -> RequestRecord:
    submitted = time.perf_counter() - t0
    stream = aeng.submit(spec)
    rec = RequestRecord(
        request_id=spec.request_id, arrival_s=submitted if arrival is None else arrival,
        prompt_tokens=len(spec.prompt), output_tokens=0, rejected=stream.rejected,
        warmup=warmup,
    )
    async for event in stream:
        rec.token_times_s.append(event.time_s - t0)
    seq = stream.seq
    rec.output_tokens = len(rec.token_times_s)
    if rec.token_times_s:
        rec.first_token_s = rec.token_times_s[0]
    rec.finish_s = time.perf_counter() - t0 if stream.rejected is None else None
    if rec.token_times_s and seq.finish_reason is not None:
        rec.finish_s = rec.token_times_s[-1]
    if seq.first_scheduled_s is not None:
        rec.scheduled_s = seq.first_scheduled_s - t0
    rec.cached_tokens = seq.num_cached_tokens
    rec.num_preemptions = seq.num_preemptions
    rec.finish_reason = seq.finish_reason if stream.rejected is None else "rejected"
    return rec


OnRecord = Callable[[RequestRecord], None]


def _ignore(record: RequestRecord) -> None:
    pass


async def closed_loop(aeng: AsyncEngine, specs: list[RequestSpec], concurrency: int,
                      num_warmup: int, t0: float, on_record: OnRecord = _ignore,
                      on_warm: Callable[[], None] = lambda: None) -> list[RequestRecord]:
    """`concurrency` clients take the next spec from a shared, ordered queue.

    The first `num_warmup` specs run as a phase of their own, at the same concurrency,
    and end before any measured request is submitted: nothing measured overlaps the
    warm-up, and every one of the remaining specs is measured. `on_warm` runs between.
    """
    records: list[RequestRecord] = []

    async def client(feed: Iterator[RequestSpec], warmup: bool) -> None:
        for spec in feed:
            records.append(await _serve(aeng, spec, warmup, t0))
            on_record(records[-1])

    for phase, warmup in ((specs[:num_warmup], True), (specs[num_warmup:], False)):
        feed = iter(phase)
        await asyncio.gather(*(client(feed, warmup) for _ in range(min(concurrency, len(phase)))))
        if warmup:
            on_warm()
    return sorted(records, key=lambda r: r.request_id)


async def open_loop(aeng: AsyncEngine, specs: list[RequestSpec], num_warmup: int,
                    t0: float, on_record: OnRecord = _ignore,
                    on_warm: Callable[[], None] = lambda: None) -> list[RequestRecord]:
    """Submit each spec at its arrival offset (specs carry the rate's offsets).

    As in the closed loop, the warm-up specs run first and end before the measured
    phase; the measured arrivals then start over from the phase's start (offsets
    relative to the first measured spec), so every measured request is measured.
    """

    async def one(spec: RequestSpec, start: float, warmup: bool) -> RequestRecord:
        delay = start + spec.arrival_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        record = await _serve(aeng, spec, warmup, t0, start + spec.arrival_s - t0)
        on_record(record)
        return record

    records: list[RequestRecord] = []
    for phase, warmup in ((specs[:num_warmup], True), (specs[num_warmup:], False)):
        if not phase:
            continue
        start = time.perf_counter() - phase[0].arrival_s
        records += await asyncio.gather(*(one(s, start, warmup) for s in phase))
        if warmup:
            on_warm()
    return records
