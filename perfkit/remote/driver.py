"""One sweep level against a remote OpenAI-compatible server.

The same specs, the same closed/open loops and warm-up phases as the in-process sweep,
served over HTTP. The level's specs are drawn once here and dealt out (loadgen/deal.py):
with one worker the load runs in this process's event loop, as it always has; with more,
each worker process (or Ray actor) runs its share and streams its records back
(loadgen/pool.py). Around the load, here: the process samplers (this process's CPU and
GC), with --scrape-metrics the Prometheus scraper (its own thread), and with
--server-profile the server's profiler around the measured phase. All of them restart
when the measured phase starts. Each worker measures its own cost (loadgen/overhead.py).
With --server-traces, after the level: the wait for the server's spans of its records and
their join (traces/session.py).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from perfkit import clock
from perfkit.config.schema import Profile
from perfkit.loadgen.auto import WorkerChoice
from perfkit.loadgen.client import Render, Target
from perfkit.loadgen.core import LevelJob, ShareRun, loop_name, new_loop, run_share
from perfkit.loadgen.deal import deal
from perfkit.loadgen.overhead import WorkerIdentity, level_overhead
from perfkit.measure.samplers import LevelSamplers
from perfkit.records import RequestRecord
from perfkit.remote.level import RemoteRun, remote_level_result
from perfkit.remote.profile import ProfileCall
from perfkit.remote.scrape import Scraper
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.result.remote import LostWorker, ServerMetrics, ServerProfile
from perfkit.sweep.loops import OnRecord
from perfkit.sweep.plan import SweepPlan
from perfkit.sweep.runner import level_specs
from perfkit.traces.session import TraceSession
from perfkit.workload import RequestSpec

NO_SCRAPE = "unavailable: no --scrape-metrics"


@dataclass(frozen=True)
class RemoteSweep:
    """What every level of a remote sweep shares."""

    target: Target
    scrape_url: str | None
    profile: Profile
    plan: SweepPlan
    render: Render | None = None  # --tokenizer: token ids -> text of as many tokens
    profile_keys: frozenset[str] = frozenset()  # --server-profile: level slugs
    profile_dir: Path | None = None  # --server-profile-dir: the server's trace folder
    workers: WorkerChoice = field(default_factory=lambda: WorkerChoice(1, 1))
    launcher: Callable[[], object] | None = None  # --ray: Ray actors; None: processes here
    traces: TraceSession | None = None  # --server-traces: the receiver of the server's spans

    def profiler(self, level: LoadPoint, repeat: int) -> ProfileCall | None:
        if level.slug not in self.profile_keys:
            return None
        slug = level.slug + (f"-r{repeat}" if self.plan.repeats > 1 else "")
        return ProfileCall(self.target.url, slug, self.profile_dir, self.target.headers())

    def workers_at(self, level: LoadPoint) -> int:
        return self.workers.at(level, float(self.profile.workload.output_len.mean))



class _Around:
    """What runs beside the load, in this process: samplers, scraper, server profiler."""

    def __init__(self, sweep: RemoteSweep, level: LoadPoint, repeat: int, t0: float,
                 samplers: LevelSamplers) -> None:
        self.samplers = samplers
        self.scraper = Scraper(sweep.scrape_url, t0) if sweep.scrape_url else None
        self.profiler = sweep.profiler(level, repeat)
        self.warm_phase = sweep.plan.num_warmup > 0

    async def start(self) -> None:
        if self.scraper is not None:
            self.scraper.start()
        if self.profiler is not None and not self.warm_phase:
            await self.profiler.start()  # no warm-up phase: the measured phase starts now

    async def warm(self) -> None:  # the measured phase starts: measure it only
        self.samplers.stop()
        self.samplers.start()
        if self.scraper is not None:
            await asyncio.to_thread(self.scraper.mark)
        if self.profiler is not None:
            await self.profiler.start()

    async def stop(self) -> tuple[ServerProfile | None, ServerMetrics]:
        profiled = None if self.profiler is None else await self.profiler.stop()
        server = (ServerMetrics.unavailable(NO_SCRAPE) if self.scraper is None
                  else await asyncio.to_thread(self.scraper.stop))
        return profiled, server


def _here(index: int) -> WorkerIdentity:
    return WorkerIdentity(index, socket.gethostname(), os.getpid(), loop_name())


class RemoteRunner:
    """Runs levels against the target; its worker pool (if any) lives until close()."""

    def __init__(self, sweep: RemoteSweep) -> None:
        self.sweep = sweep
        self.pool: object | None = None

    def __enter__(self) -> RemoteRunner:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        from perfkit.loadgen.pool import WorkerPool

        if isinstance(self.pool, WorkerPool):
            self.pool.close()
        self.pool = None

    def _pool(self, size: int) -> object:
        """The pool, with at least `size` workers started (it grows, never shrinks)."""
        from perfkit.loadgen.local import LocalLauncher
        from perfkit.loadgen.pool import WorkerPool

        if self.pool is None:
            launcher = LocalLauncher() if self.sweep.launcher is None else self.sweep.launcher()
            self.pool = WorkerPool(launcher, size)  # type: ignore[arg-type]
        assert isinstance(self.pool, WorkerPool)
        self.pool.size = max(self.pool.size, size)
        return self.pool

    def level(self, point: LoadPoint, repeat: int, on_record: OnRecord) -> LevelResult:
        """Run one level; its result (same layout as in-process levels, plus `server`,
        `errors` and `client`)."""
        sweep = self.sweep
        clock.level_starts()  # --lockstep: levels alternate with the peer's (duet)
        specs = level_specs(sweep.profile, sweep.plan, point)
        texts = (None if sweep.render is None
                 else {s.request_id: sweep.render(s.prompt) for s in specs})
        # No NVML here: the GPU that matters is the server's, not this machine's.
        samplers = LevelSamplers(0, enabled=sweep.plan.samplers)
        samplers.start()
        n = sweep.workers_at(point)
        if n > 1 or sweep.launcher is not None:
            run = self._pooled(point, repeat, specs, texts, n, on_record, samplers)
        else:
            run = self._in_process(point, repeat, specs, texts, on_record, samplers)
        if sweep.traces is not None:  # the records, merged: wait for their spans, join them
            run.traces = sweep.traces.join(run.records, sweep.profile.sweep.percentiles)
        return remote_level_result(run, sweep.profile.slo, sweep.profile.sweep.percentiles)

    def _jobs(self, point: LoadPoint, repeat: int, specs: list[RequestSpec], n: int,
              texts: dict[int, str] | None) -> list[LevelJob]:
        plan = self.sweep.plan
        return [LevelJob(point, repeat, sh.clients, sh.specs, sh.num_warmup,
                         (sh.least, plan.min_level_s), plan.ramp, self.sweep.target,
                         None if texts is None else {s.request_id: texts[s.request_id]
                                                     for s in sh.specs})
                for sh in deal(specs, plan.num_warmup, point, n, plan.requests_at(point))]

    def _in_process(self, point: LoadPoint, repeat: int, specs: list[RequestSpec],
                    texts: dict[int, str] | None, on_record: OnRecord,
                    samplers: LevelSamplers) -> RemoteRun:
        [job] = self._jobs(point, repeat, specs, 1, texts)

        async def go() -> tuple[ShareRun, ServerProfile | None, ServerMetrics]:
            t0 = time.perf_counter()
            around = _Around(self.sweep, point, repeat, t0, samplers)
            await around.start()
            run = await run_share(job, t0, _here(0), None, on_record, around.warm)
            return (run, *await around.stop())

        loop = new_loop()
        try:
            run, profiled, server = loop.run_until_complete(go())
        finally:
            loop.close()
        overhead = level_overhead(point, [run.cost], run.records, run.lags,
                                  self.sweep.workers.describe(1), (), self.sweep.workers.cores,
                                  run.target_down)
        return RemoteRun(point, repeat, run.records, _errors(run.records), run.retry_after_s,
                         overhead, server, samplers.stop(), run.cached_reported, profiled)

    def _pooled(self, point: LoadPoint, repeat: int, specs: list[RequestSpec],
                texts: dict[int, str] | None, want: int, on_record: OnRecord,
                samplers: LevelSamplers) -> RemoteRun:
        from perfkit.loadgen.pool import WorkerPool

        pool = self._pool(want)
        assert isinstance(pool, WorkerPool)
        n = min(want, pool.ensure())
        jobs = self._jobs(point, repeat, specs, n, texts)
        t0 = time.perf_counter()
        around = _Around(self.sweep, point, repeat, t0, samplers)
        asyncio.run(around.start())
        out = pool.run_level(jobs, t0, on_record, lambda: asyncio.run(around.warm()))
        profiled, server = asyncio.run(around.stop())
        return _merged(self.sweep, point, repeat, out.runs, out.lost, out.records, n, server,
                       samplers, profiled)


def _merged(sweep: RemoteSweep, point: LoadPoint, repeat: int, runs: list[ShareRun],
            lost: list[LostWorker], records: list[RequestRecord], n: int,
            server: ServerMetrics, samplers: LevelSamplers,
            profiled: ServerProfile | None) -> RemoteRun:
    """The workers' records and costs as one level's (percentiles later, from the merged
    raw samples)."""
    records = sorted(records, key=lambda r: r.request_id)
    retry = [s for run in runs for s in run.retry_after_s]
    lags = [lag for run in runs for lag in run.lags]
    down = next((run.target_down for run in runs if run.target_down), None)
    overhead = level_overhead(point, [run.cost for run in runs], records, lags,
                              sweep.workers.describe(n), lost, sweep.workers.cores, down)
    return RemoteRun(point, repeat, records, _errors(records), retry, overhead, server,
                     samplers.stop(), any(run.cached_reported for run in runs), profiled)


def _errors(records: list[RequestRecord]) -> dict[int, str]:
    return {r.request_id: r.error for r in records if r.error is not None}
