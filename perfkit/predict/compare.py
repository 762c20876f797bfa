"""A prediction beside a live sweep of the same levels: live, predicted and the error.

A live level run several times (--repeats) is the mean of its runs' values; a level the
live sweep did not run is left out. error = (predicted - live) / live. The live sweep ran
the predicted profile when their resolved profiles agree but for sweep.repeats (the
prediction runs each level once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfkit.predict.levels import PredictedLevel, Prediction
from perfkit.result.level import Latency, LevelResult, Throughput
from perfkit.result.sweep import SweepResult


@dataclass(frozen=True)
class Pair:
    live: float | None  # seconds or per-second rates, as the metric's unit
    predicted: float | None
    error: float | None  # (predicted - live) / live, a share; None when either is missing


@dataclass(frozen=True)
class LevelComparison:
    level: str  # "c=4", "2/s"
    live_runs: int
    ttft_p50: Pair
    tpot_p50: Pair
    e2e_p50: Pair
    output_tokens_per_s: Pair


@dataclass(frozen=True)
class Comparison:
    live: str  # the live result's file, as given
    live_profile_sha256: str
    same_profile: bool  # the live sweep's resolved profile is the predicted one (see doc)
    levels: list[LevelComparison]


Metric = Callable[[Latency, Throughput], float | None]
METRICS: dict[str, Metric] = {
    "ttft_p50": lambda lat, thr: lat.ttft.p50,
    "tpot_p50": lambda lat, thr: lat.tpot.p50,
    "e2e_p50": lambda lat, thr: lat.e2e.p50,
    "output_tokens_per_s": lambda lat, thr: thr.output_tokens_per_s,
}


def _pair(metric: Metric, runs: list[LevelResult], pred: PredictedLevel) -> Pair:
    values = [v for v in (metric(r.latency, r.throughput) for r in runs) if v is not None]
    live = sum(values) / len(values) if values else None
    predicted = metric(pred.latency, pred.throughput)
    error = None if live is None or predicted is None or live == 0 \
        else (predicted - live) / live
    return Pair(live, predicted, error)


def _but_repeats(resolved: dict[str, Any]) -> dict[str, Any]:
    sweep = {k: v for k, v in resolved.get("sweep", {}).items() if k != "repeats"}
    return {**resolved, "sweep": sweep}


def compare(prediction: Prediction, live: SweepResult, live_path: str,
            resolved: dict[str, Any]) -> Comparison:
    """`resolved`: the predicted profile, every key (config.profile.profile_dict)."""
    runs: dict[str, list[LevelResult]] = {}
    for lv in live.levels:
        runs.setdefault(lv.point.short, []).append(lv)
    levels = []
    for pred in prediction.levels:
        group = runs.get(pred.point.short)
        if group:
            pairs = {name: _pair(metric, group, pred) for name, metric in METRICS.items()}
            levels.append(LevelComparison(pred.point.short, len(group), **pairs))
    same = _but_repeats(live.profile.resolved) == _but_repeats(resolved)
    return Comparison(live_path, live.profile.sha256, same, levels)
