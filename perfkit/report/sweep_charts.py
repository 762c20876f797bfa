"""Sweep results -> the load charts: throughput and p50/p99 TTFT/TPOT against
concurrency (knee marked), and latency distributions per level.

Curves: one point per x (concurrency, or arrival rate for open-loop levels);
repeats of a level are averaged, as the knee does (`perfkit.summary.knee_rule.knee_of`).
Each input keeps one colour (`color_of(index in the report)`) in every chart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfkit.report.cells import level_name
from perfkit.report.chart_axes import Axis
from perfkit.report.chart_bars import LADDER_KEYS, LadderRow, ladder_chart
from perfkit.report.charts import Chart, Mark, Series, color_of, line_chart
from perfkit.report.report_inputs import ReportInput
from perfkit.result import Distribution, LevelResult, SweepResult

Level = LevelResult
X_AXES = {"concurrency": Axis("concurrency (clients)", log2=True),
          "rate": Axis("arrival rate (requests/s)", log2=True)}
MS = 1e-3


@dataclass(frozen=True)
class SweepIn:
    """A sweep input and its colour: the index of the input in the whole report."""

    inp: ReportInput
    color: str

    @property
    def label(self) -> str:
        return self.inp.label

    @property
    def result(self) -> SweepResult:
        assert self.inp.sweep is not None  # sweeps_of keeps sweep inputs only
        return self.inp.sweep

    @property
    def levels(self) -> list[Level]:
        return list(self.result.levels)


def sweeps_of(inputs: Sequence[ReportInput]) -> list[SweepIn]:
    return [SweepIn(inp, color_of(i)) for i, inp in enumerate(inputs) if inp.kind == "sweep"]


def x_of(lv: Level) -> tuple[str, float]:
    """("concurrency", C) for a closed-loop level, ("rate", R) for an open-loop one."""
    point = lv.point
    return ("concurrency" if point.closed else "rate"), point.x


def level_order(lv: Level) -> tuple[int, float, int]:
    kind, x = x_of(lv)
    return (0 if kind == "concurrency" else 1, x, lv.repeat)


def named(s: SweepIn, what: str, many: bool) -> str:
    """'what' alone for one input; 'what · label' when inputs overlay."""
    return f"{what} · {s.label}" if many else what


def curve(levels: Sequence[Level], kind: str, get: Callable[[Level], float | None]
          ) -> tuple[list[float], list[float | None]]:
    """Sorted x of one kind, and the mean over repeats of the present values (else None)."""
    by_x: dict[float, list[float]] = {}
    for lv in levels:
        k, x = x_of(lv)
        if k == kind:
            value = get(lv)
            by_x.setdefault(x, []).extend([] if value is None else [float(value)])
    xs = sorted(by_x)
    return xs, [sum(by_x[x]) / len(by_x[x]) if by_x[x] else None for x in xs]


def _knee_marks(sweeps: Sequence[SweepIn], kind: str) -> list[Mark]:
    if kind != "concurrency":
        return []
    marks = []
    for s in sweeps:
        knee = s.result.knee
        if knee is not None and knee.level is not None:
            label = "knee" + (f" {s.label}" if len(sweeps) > 1 else "")
            marks.append(Mark(float(knee.level), label, s.color))
    return marks


def _dist(lv: Level, metric: str) -> Distribution:
    dist: Distribution = getattr(lv.latency, metric)
    return dist


def _get(metric: str, pct: str) -> Callable[[Level], float | None]:
    return lambda lv: getattr(_dist(lv, metric), pct)


def _throughput(lv: Level) -> float | None:
    return lv.throughput.output_tokens_per_s


def load_charts(sweeps: Sequence[SweepIn]) -> list[Chart]:
    """Throughput, TTFT and TPOT curves for each kind of x present."""
    kinds = [k for k in X_AXES if any(x_of(lv)[0] == k for s in sweeps for lv in s.levels)]
    charts = []
    for kind in kinds:
        suffix = "" if kind == "concurrency" else "-rate"
        marks = _knee_marks(sweeps, kind)
        thr = [Series(s.label, *curve(s.levels, kind, _throughput), s.color) for s in sweeps]
        knees = _knee_sentences(sweeps) if kind == "concurrency" else []
        charts.append(line_chart(
            "throughput" + suffix, f"Output throughput vs {kind}", thr, X_AXES[kind],
            Axis("output tokens/s"), marks, " ".join(["Mean over repeats.", *knees])))
        many = len(sweeps) > 1
        for metric, name in (("ttft", "TTFT"), ("tpot", "TPOT")):
            series = [Series(named(s, pct, many), *curve(s.levels, kind, _get(metric, pct)),
                             s.color, dashed=(pct == "p50"))
                      for s in sweeps for pct in ("p99", "p50")]
            charts.append(line_chart(
                metric + suffix, f"{name} p50 / p99 vs {kind}", series, X_AXES[kind],
                Axis(f"{name} (ms)", unit=MS), marks,
                "Solid: p99, dashed: p50; mean over repeats."))
    return charts


def _knee_sentences(sweeps: Sequence[SweepIn]) -> list[str]:
    out = []
    for s in sweeps:
        knee = s.result.knee
        if knee is not None and knee.sentence:
            out.append(("" if len(sweeps) == 1 else f"{s.label}: ") + knee.sentence)
    return out


def level_rows(sweeps: Sequence[SweepIn]) -> list[tuple[SweepIn, Level]]:
    """Every (input, level), grouped by level so overlaid inputs sit side by side."""
    rows = [(s, lv) for s in sweeps for lv in s.levels]
    index = {id(s): i for i, s in enumerate(sweeps)}
    return sorted(rows, key=lambda r: (level_order(r[1]), index[id(r[0])]))


def distribution_charts(sweeps: Sequence[SweepIn]) -> list[Chart]:
    """TTFT, TPOT and E2E per level as percentile ladders."""
    many = len(sweeps) > 1
    charts = []
    for metric, name in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E latency")):
        rows = []
        for s, lv in level_rows(sweeps):
            stats = {k: getattr(_dist(lv, metric), k) for k in LADDER_KEYS}
            if all(v is not None for v in stats.values()):
                rows.append(LadderRow(named(s, level_name(lv), many), s.color,
                                      {k: float(v) for k, v in stats.items()}))
        charts.append(ladder_chart(
            f"{metric}-dist", f"{name} distribution per level", rows, Axis(f"{name} (ms)", MS),
            [(s.label, s.color) for s in sweeps],
            "Line: min to max; box: p50 to p99; bold: p50; thin: p90."))
    return charts
