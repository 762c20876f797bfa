"""The regression gate: compare two sweep results level by level, metric by metric.

Policy (the tolerance band is max(rel_tol * |baseline|, abs_tol) around no change):
  timing  pooled percentile of raw samples; 95% interval of the change from a
          two-stage bootstrap (repeats, then requests). Regression only when the
          whole interval lies beyond the band on the bad side. No interval (a side
          has < 5 samples beyond the percentile: p99 needs 500) -> too few samples.
          One repeat on a side leaves run-to-run shifts unmeasured: band x3.
  repeat  mean over repeats; Welch t-interval (95%). Fewer than 2 repeats a side:
          no interval, and only a change beyond 3x the band alarms.
  count   exact by default; any move beyond the band is "changed" and fails when
          required, whichever way it went: deterministic behaviour changed.
Verdicts: ok, within noise, improved, regression, changed, missing (no level, no
samples, or the sampler did not run), not measured (the result holds None for it on a
side: a remote target has no KV block counts; never compared, so never "ok"), too few
samples (shown, never failing: the percentile cannot be resolved from the data). A row
fails the gate when its metric is required and the verdict is regression, changed,
missing or not measured (nothing passes silently); optional metrics never fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfkit.config.schema import GateRule
from perfkit.errors import PerfkitError
from perfkit.gate import stats
from perfkit.gate.inputs import (
    LevelSamples,
    incomparable,
    level_samples,
    load,
    num_repeats,
    profile_diffs,
    side_info,
)
from perfkit.gate.rules import METRICS, Metric, profile_rules, read_rules_file, tolerance
from perfkit.gate.stats import Interval, decide
from perfkit.result.sweep import SweepResult
from perfkit.summary.latency import percentile

Verdict = Literal["ok", "within noise", "improved", "regression", "changed", "missing",
                  "not measured", "too few samples"]
FAILING: frozenset[str] = frozenset({"regression", "changed", "missing", "not measured"})
MIN_REPEATS = 3  # fewer: per-repeat metrics get a note, and no interval below 2
OPEN_LOOP_MIN_TOL = 0.10  # schedule-dependent counts on open-loop levels: at least 10%


@dataclass
class GateRow:
    """One (level, metric) comparison; values in the metric's unit."""

    level: str  # "c=4" or "2/s"
    metric: str
    kind: str  # timing | repeat | count (see gate_rules)
    unit: str
    direction: str  # which way is better: lower | higher
    required: bool
    verdict: Verdict
    baseline: float | None = None  # pooled percentile, mean over repeats, or the count
    current: float | None = None
    delta: float | None = None  # current - baseline
    interval: Interval | None = None  # 95% interval of delta; None: no interval
    tolerance: float = 0.0  # half-width of the accepted band around 0, in unit
    note: str = ""  # why: sample sizes, missing reason, direction of a changed count
    not_measured: str | None = None  # with verdict "not measured": baseline, current, both

    @property
    def fails(self) -> bool:
        return self.required and self.verdict in FAILING

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
    verdict: Literal["pass", "regression"]
    baseline: dict[str, Any]  # path, profile name, sha256, device_class, complete
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


def _not_measured(metric: Metric, rule: GateRule, label: str, base: list[float | None],
                  cur: list[float | None]) -> GateRow:
    """A side whose result holds None for the value is not compared: never "ok"."""
    sides = {"baseline": base, "current": cur}
    gone = [who for who, values in sides.items() if None in values]
    where = " and ".join(w if sides[w].count(None) == len(sides[w]) else
                         f"{w} ({sides[w].count(None)} of {len(sides[w])} repeats)" for w in gone)
    shown = {w: None if w in gone else _mean(_present(v)) for w, v in sides.items()}
    why = f": {metric.unmeasured}" if metric.unmeasured else ""
    return _row(metric, rule, label, "not measured", baseline=shown["baseline"],
                current=shown["current"], note=f"not measured in the {where} result{why}",
                not_measured="both" if len(gone) == 2 else gone[0])


def _compare_timing(metric: Metric, rule: GateRule, label: str,
                    base_runs: list[list[float]], cur_runs: list[list[float]]) -> GateRow:
    assert metric.q is not None
    base = sorted(v for run in base_runs for v in run)
    cur = sorted(v for run in cur_runs for v in run)
    if not base or not cur:
        return _missing(metric, rule, label, not base, not cur)
    b, c = percentile(base, metric.q), percentile(cur, metric.q)
    interval = stats.percentile_delta(base_runs, cur_runs, metric.q, f"{label}/{metric.name}")
    band = tolerance(rule, b)
    note = f"n={len(base)} vs {len(cur)} samples"
    if min(len(base_runs), len(cur_runs)) < 2:  # run-to-run shift unmeasured
        band *= stats.SINGLE_FACTOR
        note += f"; one repeat on a side: band widened {stats.SINGLE_FACTOR:g}x"
    if interval is None:
        note += (f"; p{metric.q:g} needs >= {stats.min_samples(metric.q)} samples a side for an "
                 "interval (more requests or repeats)")
    verdict = "too few samples" if interval is None else decide(c - b, interval, rule, band)
    return _row(metric, rule, label, verdict, baseline=b, current=c, delta=c - b,
                interval=interval, tolerance=band, note=note)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _compare_repeat(metric: Metric, rule: GateRule, label: str, base: list[float],
                    cur: list[float], min_rel: float = 0.0) -> GateRow:
    b, c = _mean(base), _mean(cur)
    interval = stats.mean_delta(base, cur)
    band = max(tolerance(rule, b), min_rel * abs(b))
    note = f"{len(base)} vs {len(cur)} repeats"
    if min(len(base), len(cur)) < MIN_REPEATS:
        note += f"; needs >= {MIN_REPEATS} repeats a side for a trustworthy interval"
    return _row(metric, rule, label, decide(c - b, interval, rule, band), baseline=b,
                current=c, delta=c - b, interval=interval, tolerance=band, note=note)


def _compare_count(metric: Metric, rule: GateRule, label: str,
                   base: list[float], cur: list[float]) -> GateRow:
    """Every current repeat must match the baseline (within the rule's band). When the
    baseline's own repeats disagree the count is not deterministic at this level, and
    only a gap between the two sides' ranges counts as a change."""
    varies = len(set(base)) > 1
    b, c = _mean(base), _mean(cur)
    if varies:
        gap = max(min(cur) - max(base), 0.0) or min(max(cur) - min(base), 0.0)
    else:
        gap = max((v - b for v in cur), key=abs)
    band = tolerance(rule, b)
    verdict: Verdict = "changed" if abs(gap) > band else "ok"
    notes = ["the baseline's repeats disagree: compared as ranges"] if varies else []
    if len(set(cur)) > 1 and not varies:
        notes.append(f"current repeats disagree: {min(cur):g}..{max(cur):g}")
    if verdict == "changed":
        better = stats.band_side(gap, rule, 0.0) > 0
        notes.append(f"{'better' if better else 'worse'} ({rule.direction} is better); "
                     "a deterministic count moved: the engine's behaviour changed")
    return _row(metric, rule, label, verdict, baseline=b, current=c, delta=c - b,
                tolerance=band, note="; ".join(notes))


def compare_metric(metric: Metric, rule: GateRule, label: str, open_loop: bool,
                   baseline: LevelSamples, current: LevelSamples) -> GateRow:
    """One row: the metric at one level of both results."""
    if metric.kind == "timing":
        return _compare_timing(metric, rule, label, baseline.timings(metric),
                               current.timings(metric))
    values = baseline.values(metric), current.values(metric)
    if not values[0] or not values[1]:
        reason = baseline.unavailable(metric) or current.unavailable(metric)
        return _missing(metric, rule, label, not values[0], not values[1], reason)
    if None in values[0] or None in values[1]:
        return _not_measured(metric, rule, label, *values)
    base, cur = _present(values[0]), _present(values[1])
    if metric.kind == "count" and metric.scheduled and open_loop:
        row = _compare_repeat(metric, rule, label, base, cur, OPEN_LOOP_MIN_TOL)
        row.note += "; open-loop level: schedule-dependent count treated as noisy"
        return row
    if metric.kind == "count":
        return _compare_count(metric, rule, label, base, cur)
    return _compare_repeat(metric, rule, label, base, cur)


# ---- whole results ---------------------------------------------------------------------


def compare_levels(baseline: SweepResult, current: SweepResult,
                   rules: dict[str, GateRule]) -> tuple[list[GateRow], list[str]]:
    """Rows for every baseline level and metric; notes on levels only in current."""
    base_levels, cur_levels = level_samples(baseline), level_samples(current)
    rows: list[GateRow] = []
    for point, base in base_levels.items():
        label = point.short
        cur = cur_levels.get(point)
        for name, metric in METRICS.items():
            rule = rules[name]
            if cur is None:
                rows.append(_row(metric, rule, label, "missing",
                                 note=f"level {label} is not in the current result"))
                continue
            rows.append(compare_metric(metric, rule, label, not point.closed, base, cur))
    extra = [p.short for p in cur_levels if p not in base_levels]
    notes = [f"levels only in the current result, not compared: {', '.join(extra)}"] if extra \
        else []
    return rows, notes


def verdict_of(rows: list[GateRow]) -> Literal["pass", "regression"]:
    return "regression" if any(r.fails for r in rows) else "pass"


def _input_notes(baseline: SweepResult, current: SweepResult, rows: list[GateRow]) -> list[str]:
    notes = []
    for who, result in (("baseline", baseline), ("current", current)):
        if not result.complete:
            notes.append(f"the {who} result is incomplete (the sweep was interrupted)")
        repeats = num_repeats(result)
        if 0 < repeats < MIN_REPEATS:
            notes.append(f"the {who} result has {repeats} repeat(s): throughput, goodput and "
                         f"system_share need >= {MIN_REPEATS} (perfkit sweep --repeats "
                         f"{MIN_REPEATS}) for an interval; until then only a change beyond "
                         f"{stats.SINGLE_FACTOR:g}x the tolerance alarms")
    if any(r.verdict == "too few samples" for r in rows):
        notes.append("some percentiles had too few samples to decide (p50 needs >= "
                     f"{stats.min_samples(50)} a side, p99 >= {stats.min_samples(99)}): raise "
                     "perfkit sweep --requests or --repeats")
    unmeasured = sorted({r.metric for r in rows if r.verdict == "not measured" and r.fails})
    if unmeasured:
        notes.append(f"required but not measured: {', '.join(unmeasured)}. To gate without "
                     "them, set required = false under [rules.METRIC] in a --rules file (or "
                     "[gate.rules.METRIC] in the profile)")
    if baseline.profile.sha256 != current.profile.sha256 and not profile_diffs(
            baseline.profile.resolved, current.profile.resolved):
        notes.append("the profiles differ only in [gate]: the baseline's rules apply")
    return notes


def evaluate(baseline: SweepResult, current: SweepResult, paths: tuple[Path, Path],
             rules_file: Path | None = None, allow_mismatch: bool = False) -> GateResult:
    """The whole gate on two loaded results (`paths` name them in messages). PerfkitError
    (exit 2) for incomparable inputs and bad rules; the baseline profile's [gate.rules]
    apply, then the rules file's."""
    if not baseline.levels:
        raise PerfkitError(f"{paths[0]}: the baseline has no levels to compare against")
    reasons = incomparable(baseline, current)
    if reasons and not allow_mismatch:
        raise PerfkitError("cannot compare these results: " + "; ".join(reasons)
                           + " (pass --allow-mismatch to compare anyway)")
    rules, warnings = profile_rules(baseline.profile.resolved, "baseline")
    if rules_file is not None:
        rules = read_rules_file(rules_file, rules)
    rows, level_notes = compare_levels(baseline, current, rules)
    notes = [f"compared despite a mismatch (--allow-mismatch): {r}" for r in reasons]
    notes += warnings + _input_notes(baseline, current, rows) + level_notes
    return GateResult(verdict_of(rows), side_info(baseline, paths[0]),
                      side_info(current, paths[1]), rows, notes)


def gate_files(baseline: Path, current: Path, rules_file: Path | None = None,
               allow_mismatch: bool = False) -> GateResult:
    """The gate on two result files (perfkit.sweep/2, or /1 upgraded on read); a
    malformed file is a PerfkitError naming it."""
    return evaluate(load(baseline), load(current), (baseline, current), rules_file,
                    allow_mismatch)
