"""The calibration file: a fitted step-time model with what it was measured on.

    {"schema": "perfkit.calibration/1",
     "device": "cpu:<cpu model>" | "cuda:<gpu name>",
     "model": {num_layers, hidden_size, ..., dtype},   the shape the steps ran (must match)
     "preset": "tiny",                                  its name, if any (informative)
     "engine": {attention_backend, cpu_threads, block_size},  as calibrated (warned on change)
     "step": {intercept_s, prefill_token_s, decode_seq_s, context_token_s},
     "fit": {num_steps, mean_step_s, rmse_s, median_abs_error, mean_error},
     "source": {profile, profile_sha256, levels, perfkit}}

A prediction refuses a calibration of another model shape (the step costs are the shape's)
and warns when the engine settings that change a step's cost differ; block size, KV pool,
batch caps and the workload may differ: they change the steps, which the model prices.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfkit.config.schema import Profile
from perfkit.errors import PerfkitError
from perfkit.files import atomic_write_text, dumps, read_json
from perfkit.predict.step_model import FitQuality, StepModel
from perfkit.result.codec import from_json, to_json

SCHEMA = "perfkit.calibration/1"
SHAPE_KEYS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
              "intermediate_size", "vocab_size", "dtype")
COST_KEYS = ("attention_backend", "cpu_threads")  # engine settings that change a step's cost


@dataclass(frozen=True)
class CalibrationSource:
    profile: str  # the profile's name
    profile_sha256: str  # its resolved hash
    levels: list[str]  # the load points run, e.g. ["c=1", "c=8"]
    perfkit: str  # the version that measured it


@dataclass(frozen=True)
class Calibration:
    device: str  # "cpu:<model>" or "cuda:<gpu name>": where the steps ran
    model: dict[str, Any]  # the model shape (SHAPE_KEYS)
    engine: dict[str, Any]  # COST_KEYS and block_size, as calibrated
    step: StepModel
    fit: FitQuality
    source: CalibrationSource
    preset: str | None = None
    schema: str = field(default=SCHEMA)


def model_shape(profile: Profile) -> dict[str, Any]:
    shape = asdict(profile.model)
    return {key: shape[key] for key in SHAPE_KEYS}


def engine_costs(profile: Profile) -> dict[str, Any]:
    eng = profile.engine
    return {"attention_backend": eng.attention_backend, "cpu_threads": eng.cpu_threads,
            "block_size": eng.block_size}


def write_calibration(cal: Calibration, path: Path) -> None:
    atomic_write_text(path, dumps(to_json(cal)))


def load_calibration(path: Path) -> Calibration:
    """Read and check a calibration file; PerfkitError naming the file otherwise."""
    doc = read_json(path)
    if not isinstance(doc, dict) or "schema" not in doc:
        raise PerfkitError(f"{path}: not a perfkit calibration (no 'schema'; write one with "
                           "perfkit calibrate)")
    if doc["schema"] != SCHEMA:
        raise PerfkitError(f"{path}: calibration schema {str(doc['schema'])[:60]!r} is not "
                           f"{SCHEMA!r}; recalibrate with this perfkit (perfkit calibrate)")
    try:
        cal = from_json(Calibration, doc, "calibration")
    except PerfkitError as err:
        raise PerfkitError(f"{path}: malformed calibration: {err}") from None
    missing = [key for key in SHAPE_KEYS if key not in cal.model]
    if missing:
        raise PerfkitError(f"{path}: malformed calibration: model has no {missing[0]!r}")
    return cal


def check_against(cal: Calibration, profile: Profile, where: str) -> list[str]:
    """Refuse a calibration of another model shape; the warnings for cost settings that
    differ (each one line, with the fix)."""
    shape = model_shape(profile)
    diff = [f"{k} {cal.model[k]} vs {shape[k]}" for k in SHAPE_KEYS if cal.model[k] != shape[k]]
    if diff:
        raise PerfkitError(
            f"{where}: calibrated on another model shape ({', '.join(diff[:3])}; calibration "
            f"vs profile {profile.name!r}); calibrate this model: perfkit calibrate --profile "
            f"{profile.name}")
    costs = engine_costs(profile)
    return [f"{where}: engine.{key} was {cal.engine.get(key)!r} when calibrated, "
            f"{costs[key]!r} now; the step costs may differ (recalibrate with it)"
            for key in COST_KEYS if cal.engine.get(key) != costs[key]]
