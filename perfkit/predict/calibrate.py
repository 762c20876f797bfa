"""Calibrate the step-time model from a live in-process run of a profile.

The profile's levels run as `perfkit sweep` runs them (sweep/runner.run_level: the model
executor, the AsyncEngine, the same load generators and warm-up); every measured step's
features are read from Engine.on_step and its period from the engine's step records:

    period[i] = step_start_s[i + 1] - step_start_s[i]   while the engine had work after
                                                         step i (running or waiting > 0)

A step after which the engine went idle has no period (the gap is the load's, not the
step's), nor has a level's last step. torch loads here (the live engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from perfkit import __version__
from perfkit.config.profile import profile_sha256
from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine, EngineStats
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.predict.calibration import Calibration, CalibrationSource, engine_costs, model_shape
from perfkit.predict.features import StepFeatures, step_features
from perfkit.predict.step_model import fit_step_model
from perfkit.result.level import LevelResult
from perfkit.sweep.plan import plan_from_profile
from perfkit.sweep.runner import run_level


@dataclass
class StepLog:
    """Features of every step the engine ran since the last `clear` (in step order)."""

    features: list[StepFeatures] = field(default_factory=list)

    def __call__(self, out: SchedulerOutput) -> None:
        if out.scheduled:  # the engine records exactly these steps
            self.features.append(step_features(out))


def step_periods(stats: EngineStats, features: list[StepFeatures]
                 ) -> tuple[list[StepFeatures], list[float]]:
    """The measured steps that have a period, and those periods (see module doc).
    `features` holds every step of the level; the measured ones are its last
    len(stats.step_start_s) (the warm-up's were before engine.reset_stats)."""
    starts, timeline = stats.step_start_s, stats.kv_timeline
    measured = features[len(features) - len(starts):]
    if len(timeline) != len(starts):
        raise RuntimeError("calibration needs the engine's KV timeline (record_timeline)")
    kept_f, kept_p = [], []
    for i in range(len(starts) - 1):
        if timeline[i].running + timeline[i].waiting > 0:
            kept_f.append(measured[i])
            kept_p.append(starts[i + 1] - starts[i])
    return kept_f, kept_p


def device_name(engine: Engine) -> str:
    """'cpu:<cpu model>' or 'cuda:<gpu name>', as results name their device class."""
    device = engine.device
    if getattr(device, "type", "cpu") == "cuda":
        import torch

        return f"cuda:{torch.cuda.get_device_name(device)}"
    from perfkit.measure.envinfo import cpu_model

    return f"cpu:{cpu_model()}"


def calibrate(profile: Profile, on_level: Callable[[LevelResult], None] | None = None
              ) -> Calibration:
    """Run the profile's levels live and fit the step-time model on all their steps."""
    plan = plan_from_profile(profile)
    engine = Engine(profile)
    log = StepLog()
    engine.on_step = log
    features: list[StepFeatures] = []
    periods: list[float] = []
    for level in plan.levels:
        log.features.clear()
        result = run_level(engine, profile, plan, level, 0)
        kept_f, kept_p = step_periods(engine.stats, log.features)
        features += kept_f
        periods += kept_p
        if on_level is not None:
            on_level(result)
    step, fit = fit_step_model(features, periods)
    return Calibration(
        device=device_name(engine), model=model_shape(profile), engine=engine_costs(profile),
        step=step, fit=fit, preset=profile.model.preset,
        source=CalibrationSource(profile.name, profile_sha256(profile),
                                 [level.short for level in plan.levels], __version__))
