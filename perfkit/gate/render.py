"""Renderers of a gate result: rich table, Markdown (CI job summary), JUnit XML, JSON.

All read the same GateResult. JSON is undecorated, base units, every row. A "not
measured" row names its side everywhere ("not measured in current"); JUnit makes it a
failure when the metric is required and a skipped case otherwise, like "missing".
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from perfkit.files import dumps
from perfkit.gate.compare import GateResult, GateRow
from perfkit.gate.stats import CONFIDENCE, NUM_RESAMPLES, SEED

SCHEMA = "perfkit.gate/1"
SKIPPED = ("missing", "not measured")  # verdicts of rows compared without numbers
MAX_MARKDOWN_BYTES = 1_000_000  # GitHub's job summary takes at most 1 MiB
CI = f"{CONFIDENCE:.0%} CI"
TABLE_WIDTH = 120  # what the rich table needs without wrapping

# ---- cells ------------------------------------------------------------------------------


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1e3:.2f} ms" if abs(value) < 1 else f"{value:.3f} s"
    if unit == "share":
        return f"{value:.1%}"
    if unit == "bytes":
        return f"{value / 2**20:.1f} MiB"
    if unit in ("tok/s", "req/s"):
        return f"{value:.1f} {unit}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def _scaled(delta: float, row: GateRow) -> tuple[float, str]:
    """(number, suffix): percent of the baseline, points of a share, or the unit."""
    if row.unit == "share":
        return delta * 100, " pts"
    if row.baseline:
        return delta / abs(row.baseline) * 100, "%"
    return delta, "" if row.kind == "count" else f" {row.unit}"


def change_text(row: GateRow) -> str:
    """'+21.3% [+15.0, +27.9]': the change, then its interval in the same scale."""
    if row.delta is None:
        return "-"
    if row.delta == 0 and row.interval is None:
        return "0"
    if row.kind == "count" and row.interval is None:  # counts: exact first
        rel = f" ({row.delta / abs(row.baseline):+.1%})" if row.baseline else ""
        return f"{row.delta:+g}{rel}"
    value, suffix = _scaled(row.delta, row)
    text = f"{value:+.1f}{suffix}" if suffix else f"{value:+g}"
    if row.interval is not None:
        low, high = (_scaled(x, row)[0] for x in (row.interval.low, row.interval.high))
        text += f" [{low:+.1f}, {high:+.1f}]"
    return text


def tolerance_text(row: GateRow) -> str:
    if row.verdict in SKIPPED:
        return "-"
    if row.kind == "count" and not row.tolerance:
        return "exact"
    value, suffix = _scaled(row.tolerance, row)
    return f"±{value:.3g}{suffix}"


def verdict_text(row: GateRow, short: bool = False) -> str:
    side = f" in {row.not_measured}" if row.not_measured else ""
    return row.verdict + side + ("" if row.required else " (opt)" if short else " (optional)")


def cells(row: GateRow, short: bool = False) -> list[str]:
    return [row.level, row.metric, value_text(row.baseline, row.unit),
            value_text(row.current, row.unit), change_text(row), tolerance_text(row),
            verdict_text(row, short)]


HEADERS = ["level", "metric", "baseline", "current", f"change [{CI}]", "tol", "verdict"]


def headline(result: GateResult) -> str:
    failing = len(result.failures)
    if result.verdict == "pass":
        return f"pass: {len(result.rows)} checks, none failing"
    return f"regression: {failing} of {len(result.rows)} checks failing"


# ---- rich -------------------------------------------------------------------------------


def _style(row: GateRow) -> str:
    if row.fails:
        return "bold red"
    if row.verdict in ("regression", "changed", "missing"):
        return "yellow"
    return {"improved": "green", "within noise": "dim", "too few samples": "dim yellow",
            "not measured": "dim yellow"}.get(row.verdict, "")


def rich_table(result: GateResult) -> Group:
    table = Table(title=f"perfkit gate ({CI}, {NUM_RESAMPLES} resamples)",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for h in HEADERS:
        table.add_column(h, justify="left" if h in ("level", "metric", "verdict") else "right",
                         no_wrap=h != f"change [{CI}]")
    for row in result.rows:
        table.add_row(*cells(row, short=True), style=_style(row))
    parts: list[Any] = [table]
    for row in result.failures:  # a "not measured" note starts with its verdict
        why = row.note if row.verdict == "not measured" else f"{row.verdict}. {row.note}"
        parts.append(Text(f"FAIL {row.level} {row.metric}: {why}", style="red"))
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    style = "bold green" if result.verdict == "pass" else "bold red"
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
    mark = "✅" if result.verdict == "pass" else "❌"
    out = [f"## {mark} perfkit gate: {headline(result)}", "",
           f"Baseline {_side_text(result.baseline)}  ",
           f"Current {_side_text(result.current)}  ",
           f"Intervals: {CI} of the change ({NUM_RESAMPLES} bootstrap resamples for "
           "percentiles, Welch t over repeats for rates); a regression needs the whole "
           "interval beyond the tolerance.", ""]
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
    elif row.verdict in SKIPPED:
        ET.SubElement(case, "skipped", message=f"{summary}. {row.note}")
    else:
        ET.SubElement(case, "system-out").text = f"{summary}. {row.note}".strip()


def junit(result: GateResult) -> str:
    """One testcase per (level, metric); <failure> for every row that fails the gate."""
    rows = result.rows
    counts = {"tests": str(len(rows)), "failures": str(len(result.failures)), "errors": "0",
              "skipped": str(sum(r.verdict in SKIPPED and not r.fails for r in rows))}
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
        "policy": {"confidence": CONFIDENCE, "resamples": NUM_RESAMPLES, "seed": SEED},
        "notes": result.notes,
        "failures": len(result.failures),
        "rows": [r.to_dict() for r in result.rows],
    }


def json_text(result: GateResult) -> str:
    return dumps(to_dict(result))
