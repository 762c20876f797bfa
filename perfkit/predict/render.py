"""Text and JSON of a prediction and a calibration (counts and timings in tables apart)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from perfkit.files import dumps
from perfkit.predict.calibration import Calibration
from perfkit.predict.compare import Comparison, LevelComparison, Pair
from perfkit.predict.levels import PredictedLevel, Prediction
from perfkit.report.cells import TIMING_CELLS, count, ms, num, pct, table
from perfkit.result.codec import to_json

Columns = list[tuple[str, Callable[[PredictedLevel], str]]]

TIMINGS: Columns = [
    ("level", lambda lv: lv.point.short),
    *TIMING_CELLS,
    ("goodput", lambda lv: pct(lv.goodput.share)),
    ("busy", lambda lv: pct(lv.busy_share)),
]
COUNTS: Columns = [
    ("level", lambda lv: lv.point.short),
    ("reqs", lambda lv: count(lv.counts.requests)),
    ("out\ntokens", lambda lv: count(lv.counts.output_tokens)),
    ("rej.", lambda lv: count(lv.counts.num_rejected)),
    ("pre-\nempt", lambda lv: count(lv.counts.preemptions)),
    ("prefix\nhit", lambda lv: pct(lv.counts.cached_tokens / lv.counts.prompt_tokens
                                   if lv.counts.prompt_tokens else None)),
    ("steps", lambda lv: count(lv.counts.steps)),
]


def _of(levels: list[PredictedLevel], columns: Columns) -> tuple[list[str], list[list[str]]]:
    return [h for h, _ in columns], [[cell(lv) for _, cell in columns] for lv in levels]


def _err(pair: Pair) -> str:
    return "n/a" if pair.error is None else f"{pair.error * 100:+.0f}%"


def _compare_rows(levels: list[LevelComparison]) -> tuple[list[str], list[list[str]]]:
    headers = ["level", "TTFT p50\nlive ms", "\npred", "\nerror",
               "TPOT p50\nlive ms", "\npred", "\nerror",
               "out tok/s\nlive", "\npred", "\nerror"]
    body = [[c.level, ms(c.ttft_p50.live), ms(c.ttft_p50.predicted), _err(c.ttft_p50),
             ms(c.tpot_p50.live), ms(c.tpot_p50.predicted), _err(c.tpot_p50),
             num(c.output_tokens_per_s.live), num(c.output_tokens_per_s.predicted),
             _err(c.output_tokens_per_s)] for c in levels]
    return headers, body


def prediction_text(pred: Prediction, cal: Calibration,
                    comparison: Comparison | None = None) -> RenderableType:
    parts: list[RenderableType] = [
        Text(f"perfkit predict: {pred.profile} on {pred.device}", style="bold"),
        Text(f"calibration {pred.calibration}: {calibration_line(cal)}", style="dim"),
        table("Predicted timings (virtual clock)", *_of(pred.levels, TIMINGS)),
        table("Counts (deterministic)", *_of(pred.levels, COUNTS)),
    ]
    if comparison is not None:
        parts.append(table(f"Predicted vs live ({comparison.live})",
                           *_compare_rows(comparison.levels)))
        if not comparison.same_profile:
            parts.append(Text("The live sweep ran another resolved profile (more than "
                              "sweep.repeats differs): levels are compared by name only.",
                              style="yellow"))
    return Group(*parts)


def prediction_json(pred: Prediction, comparison: Comparison | None = None) -> str:
    doc: dict[str, Any] = to_json(pred)
    doc["comparison"] = None if comparison is None else to_json(comparison)
    return dumps(doc)


def calibration_line(cal: Calibration) -> str:
    """The fit in one line: its terms in µs and how well it explains its steps."""
    s, fit = cal.step, cal.fit
    return (f"step = {s.intercept_s * 1e6:.0f} µs + {s.prefill_token_s * 1e6:.2f} µs/prefill "
            f"token + {s.decode_seq_s * 1e6:.1f} µs/decode seq + "
            f"{s.context_token_s * 1e9:.1f} ns/context token; {fit.num_steps} steps "
            f"(+{fit.num_outliers} left out), median error {fit.median_abs_error:.0%}")


def calibration_text(cal: Calibration, path: str) -> RenderableType:
    fit = cal.fit
    return Group(
        Text(f"perfkit calibrate: {cal.source.profile} on {cal.device} -> {path}", style="bold"),
        Text(calibration_line(cal)),
        Text(f"mean step {fit.mean_step_s * 1e3:.2f} ms, rmse {fit.rmse_s * 1e3:.2f} ms, "
             f"bias {fit.mean_error:+.1%}; levels {', '.join(cal.source.levels)}", style="dim"))
