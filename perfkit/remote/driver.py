"""One sweep level against a remote OpenAI-compatible server.

The same specs, the same closed/open loops and warm-up phases as the in-process
sweep (perfkit.sweep.runner.drive), served over HTTP by `RemoteServe`. Around the
load, in the same event loop: the overhead meter (client CPU, loop lag) and, with
--scrape-metrics, the Prometheus scraper. The process samplers (CPU, GC) measure
the client process. All of them restart when the measured phase starts. With
--server-profile, the chosen levels' measured phases run between the server's
start_profile and stop_profile (remote/profile.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from perfkit import clock
from perfkit.config.schema import Profile
from perfkit.measure.samplers import LevelSamplers
from perfkit.records import RequestRecord
from perfkit.remote.client import RemoteServe, Render, Target, open_session
from perfkit.remote.level import RemoteRun, remote_level_result
from perfkit.remote.overhead import OverheadMeter
from perfkit.remote.profile import ProfileCall
from perfkit.remote.scrape import Scraper
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.result.remote import ServerMetrics
from perfkit.sweep.load import OnRecord
from perfkit.sweep.plan import SweepPlan
from perfkit.sweep.runner import drive, level_specs
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

    def profiler(self, level: LoadPoint, repeat: int) -> ProfileCall | None:
        if level.slug not in self.profile_keys:
            return None
        slug = level.slug + (f"-r{repeat}" if self.plan.repeats > 1 else "")
        return ProfileCall(self.target.url, slug, self.profile_dir, self.target.headers())


async def _drive(sweep: RemoteSweep, level: LoadPoint, repeat: int, specs: list[RequestSpec],
                 on_record: OnRecord, samplers: LevelSamplers) -> RemoteRun:
    t0 = time.perf_counter()
    meter = OverheadMeter(level.concurrency)
    scraper = Scraper(sweep.scrape_url, t0) if sweep.scrape_url else None

    profiler = sweep.profiler(level, repeat)

    async def on_warm() -> None:  # measure the measured phase only
        samplers.stop()
        samplers.start()
        if scraper is not None:
            await asyncio.to_thread(scraper.mark)
        if profiler is not None:
            await profiler.start()
        meter.mark()

    def on_rec(record: RequestRecord) -> None:
        meter.count(record)
        on_record(record)

    async with open_session(sweep.target, level.concurrency or 0) as session:
        serve = RemoteServe(session, sweep.target, t0, sweep.render)
        if scraper is not None:
            scraper.start()
        meter.start()
        plan = sweep.plan
        least = (plan.requests_at(level), plan.min_level_s)  # as the in-process runner
        if profiler is not None and not plan.num_warmup:
            await profiler.start()  # no warm-up phase: the measured phase starts now
        records = await drive(serve, specs, level, plan.num_warmup, t0, on_rec, on_warm, least,
                              plan.ramp)
        profiled = None if profiler is None else await profiler.stop()
        overhead = await meter.stop()
        server = (ServerMetrics.unavailable(NO_SCRAPE) if scraper is None
                  else await asyncio.to_thread(scraper.stop))
    return RemoteRun(level, repeat, records, serve.errors, serve.retry_after_s, overhead, server,
                     samplers.stop(), serve.cached_reported, profiled)


def _noop(record: RequestRecord) -> None:
    pass


def run_remote_level(sweep: RemoteSweep, level: LoadPoint, repeat: int,
                     on_record: OnRecord = _noop) -> LevelResult:
    """Run one level against the target; its result dict (same layout as in-process
    levels, plus `server`, `errors` and `client`)."""
    clock.level_starts()  # --lockstep: levels alternate with the peer's (duet)
    specs = level_specs(sweep.profile, sweep.plan, level)
    # No NVML here: the GPU that matters is the server's, not this machine's.
    samplers = LevelSamplers(0, enabled=sweep.plan.samplers)
    samplers.start()
    run = asyncio.run(_drive(sweep, level, repeat, specs, on_record, samplers))
    return remote_level_result(run, sweep.profile.slo, sweep.profile.sweep.percentiles)
