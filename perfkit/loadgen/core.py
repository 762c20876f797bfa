"""One worker's share of a level: the same closed/open loops as every sweep, over the HTTP
client, with the worker's own meter. The same code runs in perfkit's process (one worker)
and in each worker process or Ray actor; only the gate (where phases meet) and the sink
(where records go as they end) differ."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from perfkit.loadgen import gc_hold
from perfkit.loadgen.client import RemoteServe, Target, TextOf, open_pool
from perfkit.loadgen.overhead import WorkerIdentity, WorkerMeter
from perfkit.records import RequestRecord
from perfkit.result.point import LoadPoint
from perfkit.result.remote import WorkerCost
from perfkit.sweep.loops import OnWarm, Pacing, PhaseGate, drive
from perfkit.workload import RequestSpec


@dataclass(frozen=True)
class LevelJob:
    """What a worker runs for one level (pickled to worker processes)."""

    point: LoadPoint
    repeat: int
    clients: int | None  # closed loop: its clients; None: open loop
    specs: list[RequestSpec]  # its warm-up specs, then its measured ones
    num_warmup: int
    least: tuple[int, float]  # (its measured requests at least, the level's seconds at least)
    ramp: tuple[str, float]  # the profile's client ramp (each worker ramps its own clients)
    target: Target
    texts: dict[int, str] | None = None  # --tokenizer: each prompt's text, by request id


@dataclass
class ShareRun:
    """What one worker measured of one level."""

    records: list[RequestRecord]
    retry_after_s: list[float]
    cached_reported: bool
    cost: WorkerCost
    lags: list[float] = field(default_factory=list)  # its loop-lag samples (pooled later)
    target_down: str | None = None  # why it stopped sending: the target refused everything


def text_of(texts: dict[int, str] | None) -> TextOf | None:
    if texts is None:
        return None
    return lambda spec: texts[spec.request_id]


class _MeteredGate:
    """The worker's gate; its meter marks the measured phase at the phase's origin."""

    def __init__(self, inner: PhaseGate | None, meter: WorkerMeter) -> None:
        self.inner = inner
        self.meter = meter

    async def begin(self, warmup: bool) -> float:
        origin = time.perf_counter() if self.inner is None else await self.inner.begin(warmup)
        if not warmup:
            self.meter.mark(origin)
        return origin


async def run_share(job: LevelJob, t0: float, who: WorkerIdentity,
                    gate: PhaseGate | None, on_record: Callable[[RequestRecord], None],
                    on_warm: OnWarm, cpu_clock: Callable[[], float] = time.thread_time,
                    clock: tuple[float | None, float | None] = (None, None)) -> ShareRun:
    """Run the share: records go to `on_record` as they end; `t0`: the level's origin on
    this process's perf_counter; `clock`: its offset from the coordinator's and the bound."""
    meter = WorkerMeter(cpu_clock)
    async with open_pool(job.target, job.clients or 0) as pool:
        serve = RemoteServe(pool, job.target, t0, text_of(job.texts))
        paced = Pacing(t0, _MeteredGate(gate, meter), lambda: serve.down is not None)
        meter.start()
        with gc_hold.held():  # a full collection would stall every client at once
            records = await drive(serve, job.specs, job.point, job.num_warmup, t0,
                                  on_record, on_warm, job.least, job.ramp, paced, job.clients)
        lags = list(meter.lags)
        cost = await meter.stop(who, job.clients, t0, records, clock)
    return ShareRun(records, serve.retry_after_s, serve.cached_reported, cost, lags,
                    serve.down)


def loop_name() -> str:
    """The event loop a worker runs: uvloop where installed, else asyncio's own."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
