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
        "--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    png: Annotated[Path | None, typer.Option(
        "--png", help="Also write every chart as DIR/<chart>.png (needs Chromium).")] = None,
    flame: Annotated[str | None, typer.Option(
        "--flame", help="Level whose flame graph and tail view to show, e.g. 8 or rate-4 "
        "(default: the highest concurrency recorded with --stacks; without stacks the "
        "tail view takes the knee's level).")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="Name of each input in the charts, one per file, in order "
        "(default: the file names).")] = None,
    force: Annotated[bool, typer.Option(
        help="Overwrite an existing HTML file (and chart PNGs in --png DIR).")] = False,
) -> None:
    """One HTML file with plots: throughput and latency against concurrency (knee marked),
    latency distributions, KV usage, CPU time and page faults, GPU memory, fragmentation
    by policy, the findings, a flame graph and the tail view (why p99 is high at a level:
the differential flame graph and the tail breakdown). Opens offline."""
    # imported here: the report modules load only when a report is written, not for --help
    from perfkit.files import check_output, check_output_dir
    from perfkit.report.html import write_report_files
    from perfkit.report.png import export_png

    if output.is_dir():
        raise PerfkitError(f"-o {output}: is a folder; name the HTML file to write")
    check_output(output, force, "-o")
    if png is not None:  # before the HTML: a --png that cannot work writes nothing
        _check_png(png, force)
        check_output_dir(png, "--png")
    path = write_report_files(files, output, label, flame)
    console.print(f"wrote {path}", highlight=False, soft_wrap=True)
    if png is not None:
        paths = export_png(path, png)
        console.print(f"wrote {len(paths)} PNG charts to {png}", highlight=False, soft_wrap=True)


def _check_png(out_dir: Path, force: bool) -> None:
    from perfkit.report.browser import INSTALL_HINT, find_chromium

    if out_dir.exists() and not out_dir.is_dir():
        raise PerfkitError(f"--png {out_dir}: is a file; name a folder for the charts")
    if find_chromium() is None:
        raise PerfkitError(f"--png needs {INSTALL_HINT}; nothing was written")
    if not force and out_dir.is_dir() and any(out_dir.glob("*.png")):
        raise PerfkitError(f"--png {out_dir}: holds PNG files; pass --force to replace "
                           "its charts or choose another folder")
