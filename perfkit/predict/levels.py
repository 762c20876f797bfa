"""Predict every level of a profile's sweep from a calibration: the sweep's requests (the
same seeds, warm-up and level sizes: sweep/runner.level_specs), the engine with the null
executor on the virtual clock, and the sweep's own latency, throughput and goodput
functions (summary/latency.py) over the records it gives."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from perfkit.client_script import level_script
from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.predict.calibration import Calibration
from perfkit.predict.loads import play
from perfkit.predict.virtual_clock import VirtualClock
from perfkit.records import RequestRecord
from perfkit.result.level import Counts, Goodput, Latency, LoadPoint, Throughput
from perfkit.summary.latency import goodput, level_counts, level_latency, throughput
from perfkit.sweep.plan import SweepPlan, plan_from_profile
from perfkit.sweep.runner import level_specs

SCHEMA = "perfkit.prediction/1"


@dataclass(frozen=True)
class PredictedLevel:
    """One level as the model predicts it. Counts are the engine's own (deterministic);
    timings are virtual seconds."""

    concurrency: int | None
    rate: float | None
    counts: Counts  # requests, tokens, rejections, preemptions; steps of the measured phase
    latency: Latency  # TTFT, TPOT, ITL, E2E, queue (seconds)
    throughput: Throughput
    goodput: Goodput  # against the profile's SLOs
    busy_share: float | None  # share of the measured window with a step running

    @property
    def point(self) -> LoadPoint:
        return LoadPoint(self.concurrency, self.rate)


@dataclass(frozen=True)
class Prediction:
    profile: str
    device: str  # the calibration's
    calibration: str  # its file, as given
    levels: list[PredictedLevel]
    warnings: list[str]  # settings that differ from the calibration's
    schema: str = SCHEMA


def _run(engine: Engine, cal: Calibration, profile: Profile, plan: SweepPlan,
         level: LoadPoint) -> tuple[list[RequestRecord], VirtualClock, tuple[int, float]]:
    """The level's records; the clock; (steps, busy seconds) of the warm-up, to subtract."""
    engine.reset()
    clock = VirtualClock(engine, cal.step)
    specs = level_specs(profile, plan, level)
    warm = _Warm(clock)
    script = level_script(specs, plan.num_warmup, level.concurrency,
                          (plan.requests_at(level), plan.min_level_s), plan.ramp)
    records = play(clock, script, warm)
    return records, clock, (warm.steps, warm.busy_s)


class _Warm:
    """Between the phases: the clock's counters then (the measured phase is the rest)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.steps, self.busy_s = 0, 0.0

    def __call__(self) -> None:
        self.steps, self.busy_s = self.clock.steps, self.clock.busy_s


def predict_level(engine: Engine, cal: Calibration, profile: Profile, plan: SweepPlan,
                  level: LoadPoint) -> PredictedLevel:
    records, clock, (warm_steps, warm_busy) = _run(engine, cal, profile, plan, level)
    thr = throughput(records)
    counts = dataclasses.replace(level_counts(records), steps=clock.steps - warm_steps)
    window = thr.window_s
    return PredictedLevel(
        concurrency=level.concurrency, rate=level.rate, counts=counts,
        latency=level_latency(records, percentiles=profile.sweep.percentiles),
        throughput=thr, goodput=goodput(records, profile.slo),
        busy_share=min(1.0, (clock.busy_s - warm_busy) / window) if window else None)


def predict_profile(profile: Profile, cal: Calibration, calibration_path: str,
                    warnings: list[str]) -> Prediction:
    """Every load point of the profile's sweep (once: the prediction has no noise)."""
    plan = plan_from_profile(profile, samplers=False)
    engine = Engine(profile, executor=null_executor())
    levels = [predict_level(engine, cal, profile, plan, level) for level in plan.levels]
    return Prediction(profile.name, cal.device, calibration_path, levels, warnings)
