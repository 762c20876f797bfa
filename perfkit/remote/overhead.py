"""What the load generator itself costs, so a reader can tell it was not the bottleneck.

Two measures over the measured phase of a level:
  cpu_s      CPU time of the event-loop thread (time.thread_time): sending requests,
             parsing SSE, building records, scraping. All of the client's work runs
             on that one thread, so cpu_share = cpu_s / wall_s near 1 means the client
             was saturated and the latencies it measured include its own queueing.
  loop lag   a timer asks to wake every `interval_s`; how late each wake-up comes is
             how long a token that arrived then may have waited before being stamped.
"""

from __future__ import annotations

import asyncio
import time

from perfkit.result.codec import to_json
from perfkit.result.remote import ClientOverhead
from perfkit.summary.latency import distribution

LAG_INTERVAL_S = 0.01


class OverheadMeter:
    """start() in the running loop; mark() when the measured phase starts; stop()."""

    def __init__(self, connections: int | None, interval_s: float = LAG_INTERVAL_S) -> None:
        self.connections = connections
        self.interval_s = interval_s
        self.lags: list[float] = []
        self.requests = 0
        self._cpu0 = 0.0
        self._wall0 = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.mark()
        self._task = asyncio.create_task(self._tick())

    def mark(self) -> None:
        self.lags, self.requests = [], 0
        self._cpu0, self._wall0 = time.thread_time(), time.perf_counter()

    def count(self, record: object) -> None:
        self.requests += 1

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lags.append(max(0.0, loop.time() - due))

    async def stop(self) -> ClientOverhead:
        cpu = time.thread_time() - self._cpu0
        wall = time.perf_counter() - self._wall0
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        return ClientOverhead(
            cpu_s=cpu, wall_s=wall, cpu_share=cpu / wall if wall > 0 else 0.0,
            requests=self.requests,
            cpu_per_request_s=cpu / self.requests if self.requests else None,
            connections=self.connections, lag_interval_s=self.interval_s,
            loop_lag=to_json(distribution(self.lags)))
