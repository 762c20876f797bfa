"""Renderers of a gate result: rich table, Markdown (CI job summary), JUnit XML, JSON.

All read the same GateResult. JSON is undecorated, base units, every row. A "not
measured" row names its side everywhere ("not measured in current"); JUnit makes it a
failure when the metric is required and a skipped case otherwise, like "missing".
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perfkit.files import dumps
from perfkit.gate.compare import DECIDED, GateResult, GateRow, min_run_samples
from perfkit.gate.stats import CONFIDENCE, MIN_PAIRS

SCHEMA = "perfkit.gate/2"
SKIPPED = ("missing", "not measured")  # verdicts of rows compared without numbers
MAX_MARKDOWN_BYTES = 1_000_000  # GitHub's job summary takes at most 1 MiB
CI = f"{CONFIDENCE:.0%} CI"
METHOD = (f"paired runs (run i of the baseline with run i of the current side), {CI} of "
          f"the mean paired log ratio (Student t; >= {MIN_PAIRS} pairs)")

# ---- cells ------------------------------------------------------------------------------


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        if abs(value) < 1e-3:
            return f"{value * 1e6:.1f} µs"
        if abs(value) >= 1:
            return f"{value:.3f} s"
        return f"{value * 1e3:.1f} ms" if abs(value) >= 0.1 else f"{value * 1e3:.2f} ms"
    if unit == "share":
        return f"{value:.1%}"
    if unit == "bytes":
        return f"{value / 2**20:.1f} MiB"
    if unit in ("tok/s", "req/s"):
        return f"{value:.0f} {unit}" if abs(value) >= 100 else f"{value:.1f} {unit}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def _scaled(x: float, row: GateRow) -> tuple[float, str]:
    """(number, suffix) of a value in the row's scale: percent (log scale), points of a
    share, or the unit."""
    if row.scale == "log":
        return x * 100, "%"
    if row.unit == "share":
        return x * 100, "pt"
    if row.baseline and row.kind != "count":
        return x / abs(row.baseline) * 100, "%"
    return x, "" if row.kind == "count" else f" {row.unit}"


def change_text(row: GateRow) -> str:
    """'+21.3% [+15.0,+27.9]': the paired change, then its interval in the same scale."""
    if row.change is None:
        return "-"
    if row.kind == "count" and row.interval is None:  # counts: exact first
        if row.change == 0:
            return "0"
        rel = f" ({row.change / abs(row.baseline):+.1%})" if row.baseline else ""
        return f"{row.change:+g}{rel}"
    value, suffix = _scaled(row.change, row)
    text = f"{value:+.1f}{suffix}" if suffix else f"{value:+g}"
    if row.interval is not None:
        low, high = (_scaled(x, row)[0] for x in (row.interval.low, row.interval.high))
        text += f" [{low:+.1f},{high:+.1f}]"
    return text


def tolerance_text(row: GateRow) -> str:
    if row.verdict in SKIPPED:
        return "-"
    if row.kind == "count" and not row.tolerance:
        return "exact"
    value, suffix = _scaled(row.tolerance, row)
    return f"±{value:.3g}{suffix}"


def detectable_text(row: GateRow) -> str:
    """The smallest change in the bad direction this data would call a regression."""
    if row.detectable is None:
        return "-"
    value, suffix = _scaled(row.detectable, row)
    return f"{value:+.1f}{suffix}"


def verdict_text(row: GateRow, short: bool = False) -> str:
    """The verdict, its side and whether it is optional; `short` (the terminal, where the
    FAIL line names the side) leaves the side out."""
    side = f" in {row.not_measured}" if row.not_measured and not short else ""
    allowed = ("+" if short else " (allowed)") if row.allowed else ""
    return row.verdict + side + allowed + ("" if row.required else "*" if short
                                           else " (optional)")


def cells(row: GateRow, short: bool = False) -> list[str]:
    return [row.level, row.metric, value_text(row.baseline, row.unit),
            value_text(row.current, row.unit), change_text(row), tolerance_text(row),
            detectable_text(row), verdict_text(row, short)]


HEADERS = ["level", "metric", "baseline", "current", f"change [{CI}]", "tol", "detects",
           "verdict"]
SHORT_HEADERS = ["level", "metric", "baseline", "change [95% CI]", "tol", "det.", "verdict"]


def headline(result: GateResult) -> str:
    """'pass: 38 checks, 38 decided, 38 passed, 0 failed, 0 inconclusive'."""
    rows = result.rows
    failed = len(result.failures)
    decided = sum(r.verdict in DECIDED for r in rows)
    undecided = sum(r.verdict == "inconclusive" for r in rows)
    allowed = sum(r.allowed for r in rows)
    tail = f" ({allowed} allowed)" if allowed else ""
    line = (f"{result.verdict}: {len(rows)} checks, {decided} decided, "
            f"{len(rows) - failed} passed, {failed} failed, {undecided} inconclusive{tail}")
    if result.verdict == "inconclusive":
        line += f"; {to_decide(result)}"
    return line


def to_decide(result: GateResult) -> str:
    """What would decide an inconclusive gate, in words: paired runs, requests, or both."""
    runs = min(int(result.baseline.get("repeats") or 0), int(result.current.get("repeats") or 0))
    needs = []
    if runs < MIN_PAIRS:
        needs.append(f"{MIN_PAIRS} paired runs a side (now {runs})")
    if any("samples per run" in r.note for r in result.failures):
        needs.append(f">= {min_run_samples(99)} measured requests a run for the tails")
    return ("nothing regressed; " + (" and ".join(needs) or "more paired runs or requests")
            + " would decide it (docs/gate.md, the CI recipe)")


# ---- rich -------------------------------------------------------------------------------


def _style(row: GateRow) -> str:
    if row.fails:
        return "bold red"
    if row.verdict in ("regression", "changed", "missing", "inconclusive"):
        return "yellow"
    return {"improved": "green", "ok": "", "not measured": "dim yellow"}.get(row.verdict, "")


def _short_cells(row: GateRow) -> list[str]:
    full = cells(row, short=True)
    return full[:3] + full[4:]  # the current value is in the Markdown and JSON


def rich_table(result: GateResult, verbose: bool = False) -> Group:
    """Failing rows (every row with `verbose`), their reasons, notes and the summary
    line; fits 80 columns."""
    shown = result.rows if verbose else result.failures
    parts: list[Any] = []
    if shown:
        table = Table(box=None, pad_edge=False, padding=(0, 1), collapse_padding=True,
                      header_style="bold underline")
        for h in SHORT_HEADERS:
            table.add_column(h, justify="left" if h in ("level", "metric", "verdict")
                             else "right", no_wrap=True)
        for row in shown:
            table.add_row(*_short_cells(row), style=_style(row))
        parts.append(table)
        if any(not r.required for r in shown) or any(r.allowed for r in shown):
            parts.append(Text("* optional: shown, never failing; + inconclusive, allowed",
                              style="dim"))
    for row in result.failures:  # a "not measured" note starts with its verdict
        why = row.note if row.verdict == "not measured" else \
            f"{row.verdict} {change_text(row)} (tol {tolerance_text(row)}); {row.note}"
        parts.append(Text(f"FAIL {row.level} {row.metric}: {why}", style="red"))
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    style = {"pass": "bold green", "inconclusive": "bold yellow"}.get(result.verdict, "bold red")
    parts.append(Text(headline(result), style=style))
    return Group(*parts)


# ---- markdown ---------------------------------------------------------------------------


def _md_row(values: list[str]) -> str:
    return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"


def _md_table(rows: list[GateRow], why: bool, budget: int) -> list[str]:
    """Table lines within `budget` bytes; a note replaces the rows left out."""
    heads = [*HEADERS, "why"] if why else HEADERS
    lines = [_md_row(heads), "|" + "---|" * len(heads)]
    used = sum(len(line.encode()) + 1 for line in lines)
    for i, row in enumerate(rows):
        line = _md_row(cells(row) + ([row.note] if why else []))
        if used + len(line.encode()) + 1 > budget:
            lines.append(f"\n_{len(rows) - i} more rows left out to stay under GitHub's "
                         "1 MiB summary limit; see the JSON verdict._")
            break
        lines.append(line)
        used += len(line.encode()) + 1
    return lines


def _side_text(side: dict[str, Any]) -> str:
    return (f"`{side['path']}` (profile {side['profile']}, {side['sha256'][:12]}, "
            f"{side['device_class']})")


def markdown(result: GateResult) -> str:
    mark = {"pass": "✅", "inconclusive": "❔"}.get(result.verdict, "❌")
    out = [f"## {mark} perfkit gate: {headline(result)}", "",
           f"Baseline {_side_text(result.baseline)}  ",
           f"Current {_side_text(result.current)}  ",
           f"Method: {METHOD}. A regression needs the whole interval beyond the "
           "tolerance, ok the whole interval short of it; otherwise the row is "
           "inconclusive. *detects*: the smallest slowdown this data would call a "
           "regression.", ""]
    out += [f"- note: {n}" for n in result.notes]
    budget = MAX_MARKDOWN_BYTES - len("\n".join(out).encode()) - 400
    if result.failures:
        out += ["", "### Failing", ""]
        failing = _md_table(result.failures, True, budget // 2)
        out += failing
        budget -= sum(len(line.encode()) + 1 for line in failing)
    out += ["", f"<details><summary>All {len(result.rows)} checks</summary>", ""]
    out += _md_table(result.rows, False, budget)
    out += ["", "</details>", ""]
    return "\n".join(out)


# ---- junit ------------------------------------------------------------------------------


def _testcase(suite: ET.Element, row: GateRow) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"perfkit.gate.{row.level}",
                         name=row.metric, time="0")
    summary = (f"{verdict_text(row)}: baseline {value_text(row.baseline, row.unit)}, "
               f"current {value_text(row.current, row.unit)}, change {change_text(row)}, "
               f"tolerance {tolerance_text(row)}")
    if row.fails:
        failure = ET.SubElement(case, "failure", message=summary, type=row.verdict)
        failure.text = row.note
    elif row.verdict in SKIPPED or row.allowed:
        ET.SubElement(case, "skipped", message=f"{summary}. {row.note}")
    else:
        ET.SubElement(case, "system-out").text = f"{summary}. {row.note}".strip()


def junit(result: GateResult) -> str:
    """One testcase per (level, metric); <failure> for every row that fails the gate."""
    rows = result.rows
    counts = {"tests": str(len(rows)), "failures": str(len(result.failures)), "errors": "0",
              "skipped": str(sum((r.verdict in SKIPPED or r.allowed) and not r.fails
                                  for r in rows))}
    root = ET.Element("testsuites", {"name": "perfkit gate", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "perfkit gate", **counts})
    props = ET.SubElement(suite, "properties")
    for side in ("baseline", "current"):
        info = getattr(result, side)
        ET.SubElement(props, "property", name=side, value=f"{info['path']} {info['sha256']}")
    for row in rows:
        _testcase(suite, row)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


# ---- json -------------------------------------------------------------------------------


def to_dict(result: GateResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "verdict": result.verdict,
        "baseline": result.baseline,
        "current": result.current,
        "policy": {"confidence": CONFIDENCE, "method": METHOD, "min_pairs": MIN_PAIRS},
        "summary": headline(result),
        "notes": result.notes,
        "failures": len(result.failures),
        "rows": [r.to_dict() for r in result.rows],
    }


def json_text(result: GateResult) -> str:
    return dumps(to_dict(result))
