"""Stacks of another Python process: `perfkit stacks --pid PID` and `perfkit stacks -- CMD`.

--pid needs py-spy and ptrace permission over that process (no fallback can
reach into another process). A command is started by perfkit and recorded by
pid, so its exit code and terminal stay its own; under ptrace_scope 1 the
command names perfkit as its ptracer before exec (perfkit's py-spy child is a
descendant of perfkit, which Yama accepts). py-spy attaches a moment after the
command starts (interpreter start-up is not recorded). Where py-spy is missing
or may not attach, a `python ...` command (-c, -m or a script) runs under the
in-process sampler instead, with a warning; other commands are refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from perfkit.errors import PerfkitError
from perfkit.measure.envinfo import ptrace_scope, pyspy_path
from perfkit.stacks import thread_sampler
from perfkit.stacks.folded import Folded, read_folded
from perfkit.stacks.pyspy import (
    ENABLE_HINT,
    PySpyProcess,
    probe_parent_attach,
    record_args,
    set_ptracer,
)
from perfkit.stacks.record import StackRecording, StacksError, fallback_warning, finish

_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")


def check_pid(pid: int) -> None:
    """The pid names a running process that runs Python (PerfkitError: exit 2 otherwise)."""
    if pid <= 0 or not psutil.pid_exists(pid):
        raise PerfkitError(f"--pid {pid}: no such process")
    what = not_python(pid)
    if what:
        raise PerfkitError(f"--pid {pid}: {what} is not a Python process; give the pid of "
                           "a Python process (ps -C python3 -o pid,args lists them)")


def not_python(pid: int) -> str:
    """The program's name when the process runs no Python interpreter (its executable
    is no python* and no libpython is mapped); '' when it does. PerfkitError when this
    user may not read it (py-spy could not attach either)."""
    try:
        proc = psutil.Process(pid)
        exe = proc.exe() or proc.name()
        if _PYTHON_RE.match(Path(exe).name) or Path(exe).name.startswith("python"):
            return ""
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            if any("libpython" in line for line in maps):
                return ""
    except (psutil.AccessDenied, PermissionError):
        raise PerfkitError(f"--pid {pid}: this user may not read that process "
                           "(permission denied); run perfkit as its user, or as root "
                           "where ptrace is allowed") from None
    except (psutil.Error, OSError):
        return ""  # gone or unreadable for another reason: py-spy says what it can
    return exe or f"pid {pid}"


def _read_raw(raw: Path) -> Folded:
    if not raw.exists():
        return {}
    stacks = read_folded(raw)
    raw.unlink()
    return stacks


def _wait(spy: PySpyProcess, duration_s: float | None, done: Callable[[], bool]) -> None:
    """Until the duration passes, `done()` turns true or py-spy ends (target exited)."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while spy.running and not done():
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends the recording early; the files are still written
    finally:
        spy.stop()


def record_pid(pid: int, duration_s: float, out_dir: Path, name: str, rate_hz: float,
               native: bool) -> StackRecording:
    check_pid(pid)
    exe = pyspy_path()
    if exe is None:
        raise StacksError("recording another process needs py-spy: pip install py-spy")
    raw = Path(out_dir) / f".{name}.pyspy.raw"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    spy = PySpyProcess(record_args(exe, raw, rate_hz, native, pid=pid),
                       target_is_parent=pid == os.getpid())
    t0 = time.monotonic()
    why = spy.start()
    if why:
        raise StacksError(f"py-spy could not attach to pid {pid}: {why}; {ENABLE_HINT}")
    _wait(spy, duration_s, lambda: False)
    return finish(_read_raw(raw), out_dir, name, sampler_used="py-spy", reason="",
                  duration_s=time.monotonic() - t0, rate_hz=rate_hz, native=native)


def is_python(command: list[str]) -> bool:
    return bool(command) and (
        _PYTHON_RE.match(Path(command[0]).name) is not None
        or os.path.realpath(command[0]) == os.path.realpath(sys.executable)
    )


def pyspy_unusable() -> str:
    """'' when py-spy can record a process perfkit starts; else why not."""
    exe = pyspy_path()
    if exe is None:
        return "py-spy not found; pip install py-spy"
    if ptrace_scope() == 3:
        return "kernel.yama.ptrace_scope=3 forbids ptrace"
    why = probe_parent_attach(exe)
    return f"py-spy could not attach: {why}" if why else ""


def record_command(command: list[str], out_dir: Path, name: str, rate_hz: float,
                   native: bool, sampler: str = "auto",
                   duration_s: float | None = None) -> tuple[StackRecording, int]:
    """Run COMMAND to its end, recording it; (recording, the command's exit code)."""
    if not command:
        raise PerfkitError("no command given after --")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    why = "thread sampler chosen" if sampler == "thread" else pyspy_unusable()
    if not why:
        return _command_pyspy(command, out_dir, name, rate_hz, native, duration_s)
    if sampler == "py-spy" or not is_python(command):
        what = "py-spy was asked for" if sampler == "py-spy" else "the command is not `python ...`"
        raise StacksError(f"cannot record {command[0]!r}: {why}, and {what} (the in-process "
                          f"sampler only runs python -c/-m/script); {ENABLE_HINT}")
    rec, code = _command_thread(command, out_dir, name, rate_hz)
    if sampler != "thread":
        rec.reason, rec.warning = why, fallback_warning(why, native).replace("this process",
                                                                             "the command")
    return rec, code


def _allow_parent_ptracer(parent: int) -> Callable[[], None]:
    def allow() -> None:  # runs in the child between fork and exec
        set_ptracer(parent)

    return allow


def _command_pyspy(command: list[str], out_dir: Path, name: str, rate_hz: float, native: bool,
                   duration_s: float | None) -> tuple[StackRecording, int]:
    exe = pyspy_path()
    assert exe is not None
    raw = Path(out_dir) / f".{name}.pyspy.raw"
    pre = _allow_parent_ptracer(os.getpid()) if ptrace_scope() == 1 else None
    t0 = time.monotonic()
    try:
        child = subprocess.Popen(command, preexec_fn=pre)
    except OSError as err:
        raise PerfkitError(f"cannot run {command[0]!r}: {err.strerror or err}") from None
    spy = PySpyProcess(record_args(exe, raw, rate_hz, native, pid=child.pid), False)
    why = spy.start()
    warning = f"stacks: py-spy could not attach to the command: {why}" if why else ""
    if not why:
        _wait(spy, duration_s, lambda: child.poll() is not None)
    recorded_s = time.monotonic() - t0
    try:
        code = child.wait()  # with --duration the command runs on after the recording
    except KeyboardInterrupt:
        code = child.wait()
    rec = finish(_read_raw(raw), out_dir, name, sampler_used="py-spy", reason="",
                 duration_s=recorded_s, rate_hz=rate_hz, native=native, warning=warning)
    return rec, code


def _command_thread(command: list[str], out_dir: Path, name: str,
                    rate_hz: float) -> tuple[StackRecording, int]:
    raw = Path(out_dir) / f".{name}.thread.raw"
    boot = [command[0], os.path.abspath(thread_sampler.__file__), "--out", str(raw),
            "--rate", f"{rate_hz:g}", "--", *command[1:]]
    t0 = time.monotonic()
    try:
        code = subprocess.call(boot)
    except KeyboardInterrupt:
        code = 130
    except OSError as err:
        raise PerfkitError(f"cannot run {command[0]!r}: {err.strerror or err}") from None
    rec = finish(_read_raw(raw), out_dir, name, sampler_used="thread",
                 reason="thread sampler chosen", duration_s=time.monotonic() - t0,
                 rate_hz=rate_hz, native=False)
    return rec, code
