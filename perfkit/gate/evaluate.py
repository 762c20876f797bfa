"""The whole gate: two sides (each one or more runs) -> rows, notes and the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from perfkit.config.schema import GateRule
from perfkit.errors import PerfkitError
from perfkit.gate import stats
from perfkit.gate.compare import GateResult, GateRow, _row, compare_metric, min_run_samples
from perfkit.gate.inputs import incomparable, level_samples, num_repeats, profile_diffs, side_info
from perfkit.gate.rules import metrics_for, profile_rules, read_rules_file
from perfkit.gate.sides import load_side
from perfkit.result.sweep import SweepResult


def compare_levels(baseline: SweepResult, current: SweepResult,
                   rules: dict[str, GateRule]) -> tuple[list[GateRow], list[str]]:
    """Rows for every baseline level and metric; notes on levels only in current."""
    base_levels, cur_levels = level_samples(baseline), level_samples(current)
    metrics = metrics_for(baseline.profile.resolved)
    rows: list[GateRow] = []
    for point, base in base_levels.items():
        label = point.short
        cur = cur_levels.get(point)
        for name, metric in metrics.items():
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


LOCKSTEP_ALONE_NOTE_S = 5.0  # the slower side's last level runs alone for a moment anyway


def verdict_of(rows: list[GateRow]) -> Literal["pass", "regression", "inconclusive"]:
    """"pass" when nothing fails; "inconclusive" when every failing check failed only
    because the data cannot decide it (nothing regressed, changed or went missing);
    otherwise "regression". Both failing verdicts exit 1."""
    failing = [r for r in rows if r.fails]
    if not failing:
        return "pass"
    return "inconclusive" if all(r.verdict == "inconclusive" for r in failing) else "regression"


def _input_notes(baseline: SweepResult, current: SweepResult, rows: list[GateRow],
                 allow_inconclusive: bool) -> list[str]:
    notes = []
    for who, result in (("baseline", baseline), ("current", current)):
        if not result.complete:
            notes.append(f"the {who} result is incomplete (the sweep was interrupted)")
        alone = result.lockstep.alone_s if result.lockstep is not None else 0.0
        if alone > LOCKSTEP_ALONE_NOTE_S:
            notes.append(f"the {who} sweep ran {alone:.1f} s alone after its --lockstep peer "
                         "ended: its last levels were not measured beside the peer's")
    runs = min(num_repeats(baseline), num_repeats(current))
    if 0 < runs < stats.MIN_PAIRS:
        notes.append(f"{runs} paired run(s): noisy metrics need >= {stats.MIN_PAIRS} pairs "
                     "(baseline and current runs interleaved: see the CI recipe, docs/gate.md)")
    undecided = sum(r.verdict == "inconclusive" and r.required for r in rows)
    if undecided:
        allowed = "allowed by --allow-inconclusive" if allow_inconclusive else \
            "they fail the gate unless --allow-inconclusive"
        notes.append(f"{undecided} required checks are inconclusive ({allowed}): more paired "
                     f"runs or requests decide them (p99 needs >= {min_run_samples(99)} "
                     "samples per run)")
    unmeasured = sorted({r.metric for r in rows if r.verdict == "not measured" and r.fails})
    if unmeasured:
        notes.append(f"required but not measured: {', '.join(unmeasured)}. To gate without "
                     "them, set required = false under [rules.METRIC] in a --rules file (or "
                     "[gate.rules.METRIC] in the profile)")
    if baseline.profile.sha256 != current.profile.sha256 and not profile_diffs(
            baseline.profile.resolved, current.profile.resolved):
        notes.append("the profiles differ only in name, description or [gate]: the "
                     "baseline's rules apply")
    return notes


def evaluate(baseline: SweepResult, current: SweepResult, paths: tuple[Path | str, Path | str],
             rules_file: Path | None = None, allow_mismatch: bool = False,
             allow_inconclusive: bool = False) -> GateResult:
    """The whole gate on two loaded sides (`paths` name them in messages). PerfkitError
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
    if allow_inconclusive:
        for row in rows:
            row.allowed = row.verdict == "inconclusive"
    notes = [f"compared despite a mismatch (--allow-mismatch): {r}" for r in reasons]
    notes += warnings + _input_notes(baseline, current, rows, allow_inconclusive) + level_notes
    return GateResult(verdict_of(rows), side_info(baseline, paths[0]),
                      side_info(current, paths[1]), rows, notes)


def gate_files(baseline: Path, current: Path, rules_file: Path | None = None,
               allow_mismatch: bool = False, allow_inconclusive: bool = False) -> GateResult:
    """The gate on two sides, each a result file, a directory of them or a glob pattern
    (perfkit.gate.sides); a malformed file is a PerfkitError naming it."""
    (base, base_name), (cur, cur_name) = load_side(baseline), load_side(current)
    return evaluate(base, cur, (base_name, cur_name), rules_file, allow_mismatch,
                    allow_inconclusive)
