"""The regression gate: compare two sides level by level, metric by metric.

Each side is one or more runs (perfkit.gate.sides); run i of the baseline is paired
with run i of the current side, and noisy metrics are decided from the pairs
(perfkit.gate.stats: a t-interval of the mean paired log ratio, so drift shared by a
pair cancels). The tolerance band is max(rel_tol, abs_tol / |baseline|) around no change.

  timing  the percentile of each run's raw samples, paired; the row shows the pooled
          percentile of each side. A run needs MIN_RUN_SAMPLES-worth of samples for a
          percentile (p99: 50).
  repeat  one value per run (rates, shares, CPU time per token), paired.
  count   exact by default; any move beyond the band is "changed" and fails when
          required, whichever way it went: deterministic behaviour changed.
Verdicts: ok (the whole interval is short of the bad edge: decided), improved,
regression, inconclusive (the interval straddles the bad edge, or fewer than
MIN_PAIRS pairs: the data cannot decide; the note says how many pairs would), changed,
missing (no level, no samples, or the sampler did not run), not measured (the result
holds None for it on a side: a remote target has no KV block counts). A row fails
the gate when its metric is required and the verdict is regression, inconclusive
(unless allowed: --allow-inconclusive), changed, missing or not measured: nothing
passes silently. Optional metrics never fail.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from perfkit.config.schema import GateRule
from perfkit.gate import stats
from perfkit.gate.inputs import LevelSamples
from perfkit.gate.rules import Metric, tolerance
from perfkit.stats import Interval, quantile

Verdict = Literal["ok", "improved", "regression", "inconclusive", "changed", "missing",
                  "not measured"]
FAILING: frozenset[str] = frozenset({"regression", "inconclusive", "changed", "missing",
                                     "not measured"})
DECIDED: frozenset[str] = frozenset({"ok", "improved", "regression", "changed"})
OPEN_LOOP_MIN_TOL = 0.10  # schedule-dependent counts on open-loop levels: at least 10%
MIN_RUN_SAMPLES = 5  # a run's percentile needs this many samples, and half a sample beyond


@dataclass
class GateRow:
    """One (level, metric) comparison. baseline/current/delta are in the metric's unit;
    change, interval, tolerance and detectable in the row's scale: a fraction of the
    baseline (scale "log") or the metric's unit (scale "linear")."""

    level: str  # "c=4" or "2/s"
    metric: str
    kind: str  # timing | repeat | count (see gate_rules)
    unit: str
    direction: str  # which way is better: lower | higher
    required: bool
    verdict: Verdict
    baseline: float | None = None  # pooled percentile, mean over runs, or the count
    current: float | None = None
    delta: float | None = None  # current - baseline
    scale: str = "linear"  # log | linear: how change and its interval are expressed
    change: float | None = None  # paired estimate of the change (counts: delta)
    interval: Interval | None = None  # 95% interval of change; None: no interval
    tolerance: float = 0.0  # half-width of the accepted band, in the row's scale
    detectable: float | None = None  # smallest bad change this data calls a regression
    pairs: int = 0  # paired runs behind change and interval
    note: str = ""  # why: sample sizes, missing reason, pairs needed to decide
    not_measured: str | None = None  # with verdict "not measured": baseline, current, both
    allowed: bool = False  # inconclusive, and --allow-inconclusive lets it pass

    @property
    def fails(self) -> bool:
        return self.required and self.verdict in FAILING and not self.allowed

    @property
    def relative(self) -> float | None:
        """delta / |baseline|; None when either is missing or baseline is 0."""
        if self.delta is None or not self.baseline:
            return None
        return self.delta / abs(self.baseline)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"fails": self.fails, "relative": self.relative}


@dataclass
class GateResult:
    verdict: Literal["pass", "regression", "inconclusive"]
    baseline: dict[str, Any]  # path, profile name, sha256, device_class, complete, runs
    current: dict[str, Any]
    rows: list[GateRow]
    notes: list[str] = field(default_factory=list)  # warnings a reader must see

    @property
    def failures(self) -> list[GateRow]:
        return [r for r in self.rows if r.fails]


# ---- comparing one metric at one level ----------------------------------------------------


def _row(metric: Metric, rule: GateRule, label: str, verdict: Verdict, **kw: Any) -> GateRow:
    # Merged rules always carry every field: DEFAULT_RULES sets them all.
    return GateRow(label, metric.name, metric.kind, metric.unit, str(rule.direction),
                   bool(rule.required), verdict, **kw)


def _missing(metric: Metric, rule: GateRule, label: str, base: bool, cur: bool,
             reason: str = "") -> GateRow:
    where = " and ".join(w for w, gone in (("baseline", base), ("current", cur)) if gone)
    why = f" ({reason})" if reason else ""
    return _row(metric, rule, label, "missing", note=f"no {metric.name} in the {where} result{why}")


def _present(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _not_measured(metric: Metric, rule: GateRule, label: str, base: list[float | None],
                  cur: list[float | None]) -> GateRow:
    """A side whose result holds None for the value is not compared: never "ok"."""
    sides = {"baseline": base, "current": cur}
    gone = [who for who, values in sides.items() if None in values]
    where = " and ".join(w if sides[w].count(None) == len(sides[w]) else
                         f"{w} ({sides[w].count(None)} of {len(sides[w])} runs)" for w in gone)
    shown = {w: None if w in gone else _mean(_present(v)) for w, v in sides.items()}
    why = f": {metric.unmeasured}" if metric.unmeasured else ""
    return _row(metric, rule, label, "not measured", baseline=shown["baseline"],
                current=shown["current"], note=f"not measured in the {where} result{why}",
                not_measured="both" if len(gone) == 2 else gone[0])


def _undecided_note(p: stats.Paired, rule: GateRule, edges: tuple[float, float]) -> str:
    needed = stats.pairs_needed(p, rule, edges)
    if needed is None:
        return (f"more than {stats.MAX_PAIRS_ASKED} paired runs would be needed: the change "
                "sits at the tolerance")
    return f"needs >= {needed} paired runs to decide (has {p.pairs})"


def _paired_row(metric: Metric, rule: GateRule, label: str, means: tuple[float, float],
                pairs: list[tuple[float, float]], note: str) -> GateRow:
    """A row decided from paired per-run values; `means` are what the row shows."""
    b, c = means
    shown: dict[str, Any] = {"baseline": b, "current": c, "delta": c - b}
    if not pairs:
        return _row(metric, rule, label, "inconclusive", **shown, note=note)
    base, cur = [p[0] for p in pairs], [p[1] for p in pairs]
    scale = stats.scale_for(rule, base + cur)
    return _decided_row(metric, rule, label, means, stats.paired(base, cur, scale), note)


def _decided_row(metric: Metric, rule: GateRule, label: str, means: tuple[float, float],
                 summary: stats.Paired, note: str) -> GateRow:
    """A row from the paired differences' summary; `means` are what the row shows."""
    b, c = means
    shown: dict[str, Any] = {"baseline": b, "current": c, "delta": c - b}
    scale = summary.scale
    edges = stats.boundaries(rule, b, scale)
    verdict = stats.decide(summary, rule, edges)
    found = stats.detectable(summary, rule, edges)
    bad = edges[1] if rule.direction == "lower" else edges[0]
    if verdict == "inconclusive":
        note = "; ".join(filter(None, [note, _undecided_note(summary, rule, edges)]))
    return _row(metric, rule, label, verdict, **shown, scale=scale,
                change=stats.to_change(summary.mean, scale), interval=stats.interval(summary),
                tolerance=abs(stats.to_change(bad, scale)),
                detectable=None if found is None else stats.to_change(found, scale),
                pairs=summary.pairs, note=note)


def _pairs_note(kb: int, kc: int) -> str:
    note = f"{min(kb, kc)} paired runs"
    return note + (f" ({kb} vs {kc} runs: the extra ones unpaired)" if kb != kc else "")


def min_run_samples(q: float) -> int:
    """Samples one run needs for its q-th percentile: half a sample beyond it (p99: 50);
    the max (q = 100) as many as p99: the slowest of a few requests is not a tail."""
    if q >= 100.0:
        return min_run_samples(99.0)
    return max(MIN_RUN_SAMPLES, math.ceil(0.5 / (1.0 - q / 100.0) - 1e-9))


def _matched_median(metric: Metric, rule: GateRule, label: str, shown: tuple[float, float],
                    base: LevelSamples, cur: LevelSamples) -> GateRow | None:
    """A p50 row from matched requests: each pair of runs gives the median of the
    per-request log ratios over the requests both ran (same id, prompt and output: the
    same work), which leaves out how requests of different lengths shuffle around the
    median. None when the runs do not match request for request (then the runs' p50s
    are paired as for any percentile)."""
    if metric.q != 50 or not rule.rel_tol:
        return None
    diffs = [stats.matched_diff(x, y) for x, y in zip(base.keyed(metric), cur.keyed(metric))]
    if not diffs or any(d is None for d in diffs):
        return None
    summary = stats.summarise([d for d in diffs if d is not None], "log")
    note = _pairs_note(len(base.repeats), len(cur.repeats)) + "; matched requests"
    return _decided_row(metric, rule, label, shown, summary, note)


def _compare_timing(metric: Metric, rule: GateRule, label: str, baseline: LevelSamples,
                    current: LevelSamples) -> GateRow:
    assert metric.q is not None
    base_runs, cur_runs = baseline.timings(metric), current.timings(metric)
    base = sorted(v for run in base_runs for v in run)
    cur = sorted(v for run in cur_runs for v in run)
    if not base or not cur:
        return _missing(metric, rule, label, not base, not cur)
    shown = (quantile(base, metric.q / 100, presorted=True),
             quantile(cur, metric.q / 100, presorted=True))
    matched = _matched_median(metric, rule, label, shown, baseline, current)
    if matched is not None:
        return matched
    need = min_run_samples(metric.q)
    pairs = [(quantile(x, metric.q / 100), quantile(y, metric.q / 100))
             for x, y in zip(base_runs, cur_runs) if min(len(x), len(y)) >= need]
    note = _pairs_note(len(base_runs), len(cur_runs))
    if len(pairs) < min(len(base_runs), len(cur_runs)):
        note += (f"; {min(len(base_runs), len(cur_runs)) - len(pairs)} pairs left out: "
                 f"{'max' if metric.q == 100 else f'p{metric.q:g}'} needs >= {need} "
                 "samples per run")
    return _paired_row(metric, rule, label, shown, pairs, note)


def _compare_repeat(metric: Metric, rule: GateRule, label: str, base: list[float | None],
                    cur: list[float | None]) -> GateRow:
    pairs = [(b, c) for b, c in zip(base, cur) if b is not None and c is not None]
    means = _mean(_present(base)), _mean(_present(cur))
    return _paired_row(metric, rule, label, means, pairs, _pairs_note(len(base), len(cur)))


def _compare_count(metric: Metric, rule: GateRule, label: str,
                   base: list[float], cur: list[float]) -> GateRow:
    """Every current run must match the baseline (within the rule's band). When the
    baseline's own runs disagree the count is not deterministic at this level, and
    only a gap between the two sides' ranges counts as a change."""
    varies = len(set(base)) > 1
    b, c = _mean(base), _mean(cur)
    if varies:
        gap = max(min(cur) - max(base), 0.0) or min(max(cur) - min(base), 0.0)
    else:
        gap = max((v - b for v in cur), key=abs)
    band = tolerance(rule, b)
    verdict: Verdict = "changed" if abs(gap) > band else "ok"
    notes = ["the baseline's runs disagree: compared as ranges"] if varies else []
    if len(set(cur)) > 1 and not varies:
        notes.append(f"current runs disagree: {min(cur):g}..{max(cur):g}")
    if verdict == "changed":
        better = stats.band_side(gap, rule, 0.0) > 0
        notes.append(f"{'better' if better else 'worse'} ({rule.direction} is better); "
                     "a deterministic count moved: the engine's behaviour changed")
    return _row(metric, rule, label, verdict, baseline=b, current=c, delta=c - b,
                change=c - b, tolerance=band, note="; ".join(notes))


def compare_metric(metric: Metric, rule: GateRule, label: str, open_loop: bool,
                   baseline: LevelSamples, current: LevelSamples) -> GateRow:
    """One row: the metric at one level of both sides."""
    if metric.kind == "timing":
        return _compare_timing(metric, rule, label, baseline, current)
    values = baseline.values(metric), current.values(metric)
    if not values[0] or not values[1]:
        reason = baseline.unavailable(metric) or current.unavailable(metric)
        return _missing(metric, rule, label, not values[0], not values[1], reason)
    if None in values[0] or None in values[1]:
        return _not_measured(metric, rule, label, *values)
    if metric.kind == "count" and metric.scheduled and open_loop:
        noisy = dataclasses.replace(rule, rel_tol=max(rule.rel_tol or 0.0, OPEN_LOOP_MIN_TOL))
        row = _compare_repeat(metric, noisy, label, baseline.by_run(metric),
                              current.by_run(metric))
        row.note += "; open-loop level: schedule-dependent count treated as noisy"
        return row
    if metric.kind == "count":
        return _compare_count(metric, rule, label, _present(values[0]), _present(values[1]))
    return _compare_repeat(metric, rule, label, baseline.by_run(metric), current.by_run(metric))
