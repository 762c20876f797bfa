"""`perfkit stacks`: flame-graph-ready stacks of any Python process.

    perfkit stacks --pid 1234 --duration 10
    perfkit stacks -- python bench.py --flag

Writes NAME.folded (the artifact), NAME.speedscope.json and NAME.svg under
--out, then prints where the time went.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from perfkit.cli.common import console, err_console, user_errors
from perfkit.errors import PerfkitError

if TYPE_CHECKING:
    from perfkit.measure.contention import ContentionProbe
    from perfkit.stacks.record import StackRecording

DEFAULT_DURATION_S = 10.0
MAX_NAME = 200  # bytes left for ".speedscope.json" and the atomic write's temp name


def default_name(pid: int | None, command: list[str]) -> str:
    """pid-PID; the script or module for `python script.py` / `-m mod`; else the program."""
    if pid is not None:
        return f"pid-{pid}"
    prog = Path(command[0]).name
    if len(command) > 1 and prog.startswith("python"):
        if command[1] == "-m" and len(command) > 2:
            prog = command[2]
        else:
            prog = "python-c" if command[1] == "-c" else Path(command[1]).stem
    return re.sub(r"[^A-Za-z0-9._-]+", "_", prog) or "stacks"


def check_inputs(pid: int | None, command: list[str], duration: float | None, rate: float,
                 sampler: str) -> None:
    from perfkit.stacks.external import check_pid
    from perfkit.stacks.record import SAMPLERS

    if pid is None and not command:
        raise PerfkitError("nothing to record: give --pid PID, or a command after -- "
                           "(perfkit stacks -- python app.py)")
    if pid is not None and command:
        raise PerfkitError("give --pid PID or a command after --, not both")
    if duration is not None and duration <= 0:
        raise PerfkitError(f"--duration must be > 0 seconds, got {duration:g}")
    if rate <= 0:
        raise PerfkitError(f"--rate must be > 0 samples per second, got {rate:g}")
    if sampler not in SAMPLERS:
        raise PerfkitError(f"--sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    if not math.isfinite(rate) or rate > 10_000 or (duration is not None
                                                      and not math.isfinite(duration)):
        raise PerfkitError("--rate must be <= 10000 samples per second and --duration finite")
    if command and not python_program(command):
        raise PerfkitError(f"{command[0][:80]!r} is not a Python program, so it has no "
                           "Python stacks to record; give a Python command (perfkit stacks "
                           "-- python app.py) or --pid of a Python process")
    if pid is not None:
        if sampler == "thread":
            raise PerfkitError("--sampler thread records only a command perfkit starts; "
                               "--pid needs py-spy")
        check_pid(pid)


def check_outputs(out: Path, name: str, force: bool) -> None:
    """--name is a plain file name (nothing lands outside --out); every file it names
    follows the one overwrite rule, checked before the recording starts."""
    from perfkit.files import check_output, check_output_dir
    from perfkit.stacks.record import output_paths

    if (not name or name in (".", "..") or "/" in name or "\0" in name
            or name != name.strip() or len(name) > MAX_NAME):
        shown = name if len(name) <= 60 else f"{name[:60]}..."
        raise PerfkitError(f"--name {shown!r}: expected a plain file name (no '/', at most "
                           f"{MAX_NAME} characters); the files go under --out")
    check_output_dir(out, "--out")
    for path in output_paths(out, name):
        check_output(path, force, "--name")


def python_program(command: list[str]) -> bool:
    """A Python interpreter, or a script whose #! line runs one."""
    from perfkit.stacks.external import is_python

    if "\0" in command[0]:  # no file has such a name (the OS refuses it)
        return False
    if is_python(command):
        return True
    exe = shutil.which(command[0])
    try:
        with open(exe or command[0], "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def report(recording: StackRecording, top: int) -> None:
    from perfkit.stacks.summary import summary_renderable

    if recording.warning:
        err_console.print(f"[yellow]warning:[/] {recording.warning}", highlight=False,
                          soft_wrap=True)
    console.print(summary_renderable(recording, top))


def _start_contention(pid: int) -> ContentionProbe:
    from perfkit.stacks.contention_pid import start_probe

    err_console.print(f"tracing pid {pid}'s GIL and lock waits (attaching) ...")
    return start_probe(pid)


def _report_contention(probe: ContentionProbe, path: Path, top: int) -> None:
    from perfkit.files import atomic_write_text, dumps
    from perfkit.report.contention_threads import contention_renderable
    from perfkit.result.codec import to_json
    from perfkit.stacks.contention_pid import finish_probe

    sec = finish_probe(probe)
    atomic_write_text(path, dumps(to_json(sec)))
    console.print(contention_renderable(sec, top))
    console.print(f"contention: {path}")


@user_errors
def stacks(
    command: Annotated[list[str] | None, typer.Argument(
        help="A Python command to start and record, after `--`: "
             "perfkit stacks -- python app.py ARGS", show_default=False)] = None,
    pid: Annotated[int | None, typer.Option(
        "--pid", help="Record this running Python process (needs py-spy and ptrace "
                      "permission).", show_default=False)] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", help="Seconds to record --pid (default 10); with a command, stop "
                           "recording after this long (the command runs on).",
        show_default=False)] = None,
    rate: Annotated[float, typer.Option("--rate", help="Samples per second.")] = 100.0,
    native: Annotated[bool, typer.Option(
        "--native", help="Add C/C++ frames (py-spy only; pauses the target at each sample).",
    )] = False,
    out: Annotated[Path, typer.Option(
        "--out", help="Folder for NAME.folded, NAME.speedscope.json and NAME.svg.")
    ] = Path("perfkit-stacks"),
    name: Annotated[str | None, typer.Option(
        "--name", help="Base name of the files (default: pid-PID or the program's name).",
        show_default=False)] = None,
    sampler: Annotated[str, typer.Option(
        "--sampler", help="auto (py-spy, else the in-process sampler for python "
                          "commands), py-spy, or thread.")] = "auto",
    top: Annotated[int, typer.Option("--top", help="Rows in each summary table.")] = 8,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files of the same name.")
                     ] = False,
    contention: Annotated[bool, typer.Option(
        "--contention", help="With --pid: also trace its threads' GIL and lock waits (eBPF "
        "as root with bpftrace, else sampled thread states): NAME.contention.json.")
    ] = False,
) -> None:
    """Record flame-graph-ready stacks of a Python process: folded, speedscope, SVG."""
    # imported here: psutil and the samplers load only when a recording runs
    from perfkit.stacks.external import record_command, record_pid

    argv = list(command or [])
    check_inputs(pid, argv, duration, rate, sampler)
    if contention and pid is None:
        raise PerfkitError("--contention traces a running process: give --pid PID (for "
                           "perfkit's own engine: perfkit sweep --contention)")
    base = name or default_name(pid, argv)
    check_outputs(out, base, force)
    if contention:
        from perfkit.files import check_output

        check_output(out / f"{base}.contention.json", force, "--name")
    if pid is not None:
        secs = DEFAULT_DURATION_S if duration is None else duration
        probe = _start_contention(pid) if contention else None
        err_console.print(f"recording pid {pid} for {secs:g} s at {rate:g} Hz ...")
        try:
            report(record_pid(pid, secs, out, base, rate, native), top)
        finally:
            if probe is not None:  # bpftrace stops with the recording, whatever happened
                _report_contention(probe, out / f"{base}.contention.json", top)
        return
    recording, code = record_command(argv, out, base, rate, native, sampler, duration)
    report(recording, top)
    if code != 0:
        err_console.print(f"[yellow]warning:[/] {argv[0]} exited with code {code}",
                          highlight=False, soft_wrap=True)
        raise typer.Exit(code)
