"""Every way a sweep result leaves perfkit, behind one interface: SweepResult -> text.

`EXPORTERS[fmt](result)` is the machine or Markdown text of `--format fmt` (JSON is the
document itself, never decorated); `render_table(result)` the terminal summary;
`write_outputs(result, out_dir)` the files of `--out` next to result.json.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import RenderableType

from perfkit.files import atomic_write_text
from perfkit.report.levels_csv import csv_text
from perfkit.report.tables import markdown, rich_summary
from perfkit.result import SweepResult
from perfkit.result.io import result_json

Exporter = Callable[[SweepResult], str]

EXPORTERS: dict[str, Exporter] = {
    "json": result_json,
    "markdown": markdown,
    "csv": csv_text,
}
# The files of --out: name -> exporter (result.json is written as the sweep runs).
OUTPUT_FILES: dict[str, Exporter] = {"summary.md": markdown, "levels.csv": csv_text}


def render_table(result: SweepResult) -> RenderableType:
    """The summary tables, knee and findings for the terminal (rich)."""
    return rich_summary(result)


def write_outputs(result: SweepResult, out_dir: Path) -> list[Path]:
    """summary.md and levels.csv in out_dir, each written atomically; their paths."""
    paths = []
    for name, export in OUTPUT_FILES.items():
        path = out_dir / name
        atomic_write_text(path, export(result))
        paths.append(path)
    return paths
