"""`perfkit gate`: two sides of sweep runs -> per-(level, metric) verdicts -> exit code.

Each side is a result file, a directory of them or a quoted glob pattern; run i of the
baseline is paired with run i of the current side. Exit 0: pass. 1: regression or
inconclusive. 2: usage error, unreadable or incomparable inputs.
Output files follow the one overwrite rule (perfkit.files.check_output): an empty one,
such as CI's $GITHUB_STEP_SUMMARY, is replaced; one with content needs --force.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from perfkit.cli.common import console, err_console, user_errors

if TYPE_CHECKING:
    from perfkit.gate.compare import GateResult


def _write(result: GateResult, markdown: Path | None, junit: Path | None,
           json_path: Path | None) -> None:
    from perfkit.files import atomic_write_text
    from perfkit.gate import render

    for path, text in ((markdown, render.markdown), (junit, render.junit),
                       (json_path, render.json_text)):
        if path is not None:
            atomic_write_text(path, text(result))


@user_errors
def gate(
    baseline: Annotated[Path, typer.Argument(
        help="Baseline runs: a sweep result JSON, a directory of them (every result.json "
        "beneath it) or a quoted glob; taken in name order.")],
    current: Annotated[Path, typer.Argument(
        help="Runs under test, the same way; run i is paired with baseline run i.")],
    rules: Annotated[Path | None, typer.Option(
        help="TOML file of \\[rules.METRIC] tables (direction, rel_tol, abs_tol, required); "
        "they override the defaults and the profile's \\[gate.rules].")] = None,
    markdown: Annotated[Path | None, typer.Option(
        help="Write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).")] = None,
    junit: Annotated[Path | None, typer.Option(
        help="Write JUnit XML here: one test case per level and metric.")] = None,
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="Write the JSON verdict here.")] = None,
    force: Annotated[bool, typer.Option(
        help="Replace output files that have content (an empty one is always replaced).")
    ] = False,
    allow_mismatch: Annotated[bool, typer.Option(
        "--allow-mismatch",
        help="Compare even when the profiles or device classes differ (with a warning).")
    ] = False,
    allow_inconclusive: Annotated[bool, typer.Option(
        "--allow-inconclusive",
        help="Let a required check that the data cannot decide pass (it fails by default).")
    ] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show every check, not only the failing ones.")] = False,
) -> None:
    """Gate on performance regressions: exit 1 when a required metric regressed beyond
    its tolerance with 95% confidence, the data cannot decide it (inconclusive), a
    deterministic count changed, or a required metric is missing or was not measured."""
    # imported here: numpy (the bootstrap) loads only when a gate runs, not for --help
    from perfkit.files import check_output
    from perfkit.gate import render

    for what, path in (("--markdown", markdown), ("--junit", junit), ("--json", json_path)):
        if path is not None:
            check_output(path, force, what)
    from perfkit.gate.evaluate import gate_files

    result = gate_files(baseline, current, rules, allow_mismatch, allow_inconclusive)
    for note in result.notes:
        if "--allow-mismatch" in note:
            err_console.print(Text.assemble(("warning: ", "yellow"), note), highlight=False)
    _write(result, markdown, junit, json_path)
    console.print(render.rich_table(result, verbose))
    if result.verdict != "pass":
        raise typer.Exit(1)
