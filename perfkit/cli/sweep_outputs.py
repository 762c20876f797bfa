"""What a sweep writes and prints: every output file checked before level 1 (a sweep
never runs for an hour to fail on its last write), the warnings that precede the work,
and the exporters after it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from perfkit.cli.common import console, err_console
from perfkit.cli.sweep_options import SweepOptions
from perfkit.files import check_output, check_output_dir

if TYPE_CHECKING:
    from perfkit.config.schema import Profile
    from perfkit.result.sweep import SweepResult
    from perfkit.run import StackOptions


def check_result_path(opts: SweepOptions) -> Path | None:
    """The result file; every file the sweep will write is checked here, before level 1."""
    from perfkit.report.exporters import OUTPUT_FILES

    path = opts.result_path()
    if opts.out is not None:
        check_output_dir(opts.out, "--out")
        for name in OUTPUT_FILES:
            check_output(opts.out / name, opts.force, "--out")
    if path is not None:
        check_output(path, opts.force, "--json" if opts.json_path else "--out")
        if opts.report:
            check_output(path.with_suffix(".html"), opts.force, "--report")
    return path


def check_stacks_dir(opts: SweepOptions, path: Path | None) -> StackOptions | None:
    """--stacks: level-LABEL.* go to stacks/ in --out DIR, else beside the result file."""
    if not opts.stacks:
        return None
    from perfkit.run import StackOptions

    base = opts.out if opts.out is not None else (path.parent if path is not None
                                                  else Path("."))
    check_output_dir(base / "stacks", "--stacks")
    return StackOptions(base / "stacks", opts.stack_rate, opts.native)


def warn_reused_records(prof: Profile) -> None:
    """A dataset shorter than a level: say how often its records repeat, before any work."""
    if not prof.workload.dataset.path:
        return
    from perfkit.datasets.slices import reuse_note
    from perfkit.sweep.plan import plan_from_profile

    plan = plan_from_profile(prof)
    need = max((plan.num_warmup + plan.requests_at(lv) for lv in plan.levels), default=0)
    note = reuse_note(prof, need)
    if note:
        err_console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)


def export(result: SweepResult, opts: SweepOptions, path: Path | None) -> None:
    """--out's files, stdout in --format, then the HTML report (--report)."""
    from perfkit.report.exporters import EXPORTERS, render_table, write_outputs

    if opts.out is not None:
        write_outputs(result, opts.out)
    if opts.fmt == "table":
        console.print(render_table(result))
    else:
        sys.stdout.write(EXPORTERS[opts.fmt](result))
    for f in result.findings:
        if f.severity == "warning" and opts.fmt != "table":
            err_console.print(f"[yellow]warning[/] {f.id}: {f.message} Fix: {f.fix}")
    if opts.report and path is not None and result.levels:
        from perfkit.report.html import write_report

        err_console.print(f"report: {write_report([result], path.with_suffix('.html'))}")
