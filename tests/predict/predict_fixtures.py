"""Synthetic calibrations and fixed-length profiles for the prediction tests."""

from __future__ import annotations

from pathlib import Path

from perfkit.config.profile import Overrides, load_profile
from perfkit.config.schema import Profile
from perfkit.predict.calibration import (
    Calibration,
    CalibrationSource,
    engine_costs,
    model_shape,
    write_calibration,
)
from perfkit.predict.step_model import FitQuality, StepModel

# 1 ms a step, 10 µs a prompt token, 100 µs a decoding sequence, 1 ns a context token
EXACT = StepModel(intercept_s=1e-3, prefill_token_s=1e-5, decode_seq_s=1e-4,
                  context_token_s=1e-9)


def fixed_profile(prompt: int = 32, output: int = 4, *sets: str) -> Profile:
    """The default profile with fixed lengths and no warm-up, 3 requests a level."""
    return load_profile("default", Overrides(sets=(
        'workload.prompt_len.kind="fixed"', f"workload.prompt_len.mean={prompt}",
        'workload.output_len.kind="fixed"', f"workload.output_len.mean={output}",
        f"workload.output_len.min={output}", "workload.num_requests=3", "sweep.warmup=0",
        "sweep.min_requests_per_client=0", "sweep.concurrency=[1]", *sets)))


def calibration(profile: Profile, step: StepModel = EXACT) -> Calibration:
    return Calibration(
        device="cpu:test", model=model_shape(profile), engine=engine_costs(profile), step=step,
        fit=FitQuality(num_steps=100, num_outliers=0, mean_step_s=1e-3, rmse_s=0.0,
                       median_abs_error=0.0, mean_error=0.0),
        source=CalibrationSource(profile.name, "0" * 64, ["c=1"], "test"),
        preset=profile.model.preset)


def write(path: Path, profile: Profile | None = None, step: StepModel = EXACT) -> Path:
    write_calibration(calibration(profile or load_profile("default"), step), path)
    return path
