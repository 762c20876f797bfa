"""What the load generator itself costs, and how far it fell behind its own schedule, so a
reader can tell it was not the bottleneck (or see that it was).

Per worker (one event loop: the process itself, or a worker process), over the level's
measured phase:
  cpu_s       CPU the client spent: sending requests, parsing SSE, building records. A
              worker process counts its whole CPU (user + system); the client running in
              perfkit's own process counts its event-loop thread. cpu_share = cpu_s / wall_s
              near 1 means the loop was saturated: tokens waited to be read and stamped.
  loop lag    a timer asks to wake every `interval_s`; how late each wake-up comes is how
              long a chunk that arrived then may have waited before being stamped.
  send_late   sent_s - arrival_s of each measured request: how long after it was due
              (open loop: its arrival; closed loop: its client's previous request ended)
              it went out. Latencies count from the due time, so this is inside them.
  achieved concurrency (closed loop)  mean requests in flight between the moment all its
              clients had sent a request (the C-th earliest send) and its last send (after
              it, clients run out of work): C when every client always had one in flight.
Level: the workers summed (CPU, chunks, concurrency), pooled (lag, lateness) and the
busiest worker's share; open loop: the rate actually sent against the schedule's own rate
over the same requests (a poisson draw of 100 arrivals is not exactly its rate).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfkit.records import RequestRecord
from perfkit.result.codec import to_json
from perfkit.result.level import LoadPoint
from perfkit.result.remote import ClientOverhead, LostWorker, WorkerCost
from perfkit.summary.latency import distribution

LAG_INTERVAL_S = 0.01


@dataclass(frozen=True)
class WorkerIdentity:
    index: int
    host: str
    pid: int
    loop: str  # "uvloop" or "asyncio"


class WorkerMeter:
    """start() in the running loop; mark(origin) when the measured phase starts; stop()."""

    def __init__(self, cpu_clock: Callable[[], float] = time.thread_time,
                 interval_s: float = LAG_INTERVAL_S) -> None:
        self.cpu_clock = cpu_clock  # thread_time in perfkit's process, process_time in a worker
        self.interval_s = interval_s
        self.lags: list[float] = []
        self._cpu0 = 0.0
        self._origin = time.perf_counter()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.mark(time.perf_counter())
        self._task = asyncio.create_task(self._tick())

    def mark(self, origin: float) -> None:
        """The measured phase starts at `origin` (perf_counter; may be a moment ahead)."""
        self.lags = []
        self._cpu0, self._origin = self.cpu_clock(), origin

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lags.append(max(0.0, time.perf_counter() - due))

    async def stop(self, who: WorkerIdentity, clients: int | None, t0: float,
                   records: Sequence[RequestRecord],
                   clock: tuple[float | None, float | None] = (None, None)) -> WorkerCost:
        """Its cost over the measured phase; `records` are its own (t0: their origin)."""
        cpu = self.cpu_clock() - self._cpu0
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        measured = [r for r in records if not r.warmup]
        ends = [r.last_seen_s + t0 for r in measured]
        wall = max(max(ends, default=0.0) - self._origin, 1e-9)
        chunks = sum(len(r.token_times_s) for r in measured)
        return WorkerCost(
            index=who.index, host=who.host, pid=who.pid, loop=who.loop, clients=clients,
            requests=len(measured), chunks=chunks, cpu_s=cpu, wall_s=wall,
            cpu_share=cpu / wall, cpu_per_chunk_s=cpu / chunks if chunks else None,
            loop_lag=to_json(distribution(self.lags)),
            send_late=to_json(distribution(_late(measured))),
            achieved_concurrency=achieved_concurrency(measured, clients),
            coalesced_chunks=sum(r.coalesced_chunks for r in measured),
            clock_offset_s=clock[0], clock_error_s=clock[1])


def _late(records: Sequence[RequestRecord]) -> list[float]:
    return [max(0.0, late) for r in records if (late := r.send_late_s) is not None]


def achieved_concurrency(records: Sequence[RequestRecord], clients: int | None
                         ) -> float | None:
    """Mean requests in flight from the C-th earliest send to the last send (closed loop);
    None for an open loop or when fewer than C + 1 requests were sent."""
    sends = sorted(r.sent_s for r in records if r.sent_s is not None)
    if clients is None or len(sends) <= clients:
        return None
    lo, hi = sends[clients - 1], sends[-1]
    if hi <= lo:
        return None
    busy = 0.0
    for r in records:
        if r.sent_s is None:
            continue
        end = r.last_seen_s
        busy += max(0.0, min(end, hi) - max(r.sent_s, lo))
    return busy / (hi - lo)


def _rates(records: Sequence[RequestRecord]) -> tuple[float | None, float | None]:
    """(requests sent per second, the schedule's own rate) over the measured requests."""
    sends = sorted(r.sent_s for r in records if r.sent_s is not None)
    due = sorted(r.arrival_s for r in records if r.sent_s is not None)
    if len(sends) < 2 or sends[-1] <= sends[0] or due[-1] <= due[0]:
        return None, None
    return (len(sends) - 1) / (sends[-1] - sends[0]), (len(due) - 1) / (due[-1] - due[0])


def _sum(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def level_overhead(point: LoadPoint, costs: list[WorkerCost], records: list[RequestRecord],
                   lags: list[float], chosen: str = "", lost: Sequence[LostWorker] = (),
                   cores: int | None = None, target_down: str | None = None
                   ) -> ClientOverhead:
    """Every worker's cost as one level's; `lags` pools the workers' loop-lag samples.
    Costs are those of the workers that finished; `lost` ones make the level incomplete."""
    measured = [r for r in records if not r.warmup]
    cpu = sum(c.cpu_s for c in costs)
    wall = max((c.wall_s for c in costs), default=0.0)
    chunks = sum(c.chunks for c in costs)
    achieved = _sum([c.achieved_concurrency for c in costs])
    rate, scheduled = _rates(measured) if point.rate is not None else (None, None)
    if point.concurrency is not None:
        error = None if achieved is None else achieved / point.concurrency - 1
    else:
        error = None if rate is None or not scheduled else rate / scheduled - 1
    return ClientOverhead(
        cpu_s=cpu, wall_s=wall, cpu_share=max((c.cpu_share for c in costs), default=0.0),
        requests=len(measured), cpu_per_request_s=cpu / len(measured) if measured else None,
        connections=point.concurrency, lag_interval_s=LAG_INTERVAL_S,
        loop_lag=to_json(distribution(lags)), workers=len(costs) + len(lost),
        workers_chosen=chosen, cores=cores,
        chunks=chunks, chunks_per_s=chunks / wall if wall > 0 else None,
        cpu_per_chunk_s=cpu / chunks if chunks else None,
        send_late=to_json(distribution(_late(measured))),
        achieved_concurrency=achieved, achieved_rate=rate, scheduled_rate=scheduled,
        load_error=error, complete=not lost, target_down=target_down, per_worker=costs,
        lost=list(lost))
