"""`perfkit report`: result files -> one self-contained HTML report (+ PNG charts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfkit.cli.common import console, user_errors
from perfkit.errors import PerfkitError


@user_errors
def report(
    files: Annotated[list[Path], typer.Argument(
        help="Result files: perfkit sweep --json and/or perfkit fragmentation --json. "
        "Several overlay (e.g. baseline then current).", show_default=False)],
    output: Annotated[Path, typer.Option(
        "--output", "-o", help="The HTML file to write (overwritten).")] = Path("report.html"),
    png: Annotated[Path | None, typer.Option(
        "--png", help="Also write every chart as DIR/<chart>.png (needs Chromium).")] = None,
    flame: Annotated[str | None, typer.Option(
        "--flame", help="Level whose flame graph to embed, e.g. 8 or rate-4 "
        "(default: the highest concurrency recorded with --stacks).")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="Name of each input in the charts, one per file, in order "
        "(default: the file names).")] = None,
) -> None:
    """One HTML file with plots: throughput and latency against concurrency (knee marked),
    latency distributions, KV usage, CPU time and page faults, GPU memory, fragmentation
    by policy, the findings and a flame graph. Opens offline."""
    # imported here: the report modules load only when a report is written, not for --help
    from perfkit.report.html import write_report_files
    from perfkit.report.png import export_png

    if output.exists() and output.is_dir():
        raise PerfkitError(f"-o {output}: is a folder; name the HTML file to write")
    path = write_report_files(files, output, label, flame)
    console.print(f"wrote {path}", highlight=False, soft_wrap=True)
    if png is not None:
        paths = export_png(path, png)
        console.print(f"wrote {len(paths)} PNG charts to {png}", highlight=False, soft_wrap=True)
