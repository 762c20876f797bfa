"""A `py-spy record --format raw` child process: start, detect attach, stop on SIGINT.

Attaching to one's own process. py-spy is a child of the process it records.
Under Yama `kernel.yama.ptrace_scope = 1` a process may only ptrace its
descendants, so a child attaching to its parent is refused unless the parent
names it with `prctl(PR_SET_PTRACER, child_pid)`. The child must be named
before it attaches, and its pid is known only after fork, so py-spy is started
behind a gate: `sh -c 'read -r _; exec py-spy ...'` waits on stdin, the parent
calls prctl with the gate's pid (exec keeps the pid), then releases the gate.
No window where any process may attach (PR_SET_PTRACER_ANY is never used); the
exception is cleared after the recording. Scope 2 needs CAP_SYS_PTRACE (root),
scope 3 forbids ptrace: there, and in containers without SYS_PTRACE, attach
fails and the caller falls back to the in-process sampler.

py-spy prints "Sampling process ..." on stdout once attached, and exits
within about 0.4 s with an error ("Permission Denied", no such process)
when it cannot attach; on SIGINT it writes the output file and exits 0.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from perfkit.measure.envinfo import ptrace_scope

PR_SET_PTRACER = 0x59616D61  # "Yama" (linux/prctl.h)
ATTACHED_MARK = "Sampling process"
# Already root: the missing piece is the container's capability or Yama, not the user.
ENABLE_HINT = (
    "to use py-spy: " + ("" if os.geteuid() == 0 else "run as root, or ")
    + "give the container ptrace permission (docker run --cap-add SYS_PTRACE), "
    "and keep kernel.yama.ptrace_scope <= 1"
)
_GATE = 'read -r _; exec "$0" "$@"'


def set_ptracer(pid: int) -> str:
    """prctl(PR_SET_PTRACER, pid) on this process; 0 clears it. '' on success, else why not."""
    if not sys.platform.startswith("linux"):
        return "PR_SET_PTRACER is Linux-only"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(pid), 0, 0, 0) != 0:
        return f"prctl(PR_SET_PTRACER) failed: errno {ctypes.get_errno()}"
    return ""


def record_args(exe: str, output: Path, rate_hz: float, native: bool,
                pid: int | None = None, command: list[str] | None = None,
                duration_s: float | None = None) -> list[str]:
    """`py-spy record` arguments. Not `--threads` (thread ids would make stacks differ
    between runs and levels), not `--idle` (sleeping threads are not engine time).
    `--native` cannot be combined with `--nonblocking`: native mode pauses the target."""
    args = [exe, "record", "--rate", str(max(1, round(rate_hz))), "--format", "raw",
            "--output", str(output)]
    args.append("--native" if native else "--nonblocking")
    if duration_s is not None:
        args += ["--duration", str(max(1, math.ceil(duration_s)))]
    if pid is not None:
        args += ["--pid", str(pid)]
    if command:
        args += ["--", *command]
    return args


def failure_line(output: str) -> str:
    """The line that says why py-spy gave up."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in lines:
        if "denied" in ln.lower() or ln.startswith("Error"):
            return ln
    useful = [ln for ln in lines if not ln.startswith("py-spy>")]
    return (useful or lines or ["py-spy exited without output"])[-1]


class PySpyProcess:
    """One py-spy child. start() -> '' when attached, else the reason it could not.

    `target_is_parent`: the target is this process (gate + PR_SET_PTRACER, own session
    so a Ctrl-C meant for perfkit reaches py-spy only through stop()). Otherwise py-spy
    runs as a plain child; `capture=False` leaves its stdout (and a spawned command's)
    on the terminal, and start() returns at once.
    """

    def __init__(self, args: list[str], target_is_parent: bool, capture: bool = True) -> None:
        self.args = args  # full py-spy command line
        self.target_is_parent = target_is_parent
        self.capture = capture  # read py-spy's output (attach detection, error line)
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: list[str] = []  # py-spy's stdout + stderr when captured
        self._attached = threading.Event()
        self._reader: threading.Thread | None = None
        self._ptracer_set = False

    def start(self, attach_timeout_s: float = 5.0) -> str:
        out = subprocess.PIPE if self.capture else None
        err = subprocess.STDOUT if self.capture else None
        if self.target_is_parent:
            self.proc = subprocess.Popen(["/bin/sh", "-c", _GATE, *self.args],
                                         stdin=subprocess.PIPE, stdout=out, stderr=err,
                                         start_new_session=True)
        else:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=err)
        if self.capture:
            self._reader = threading.Thread(target=self._read, name="perfkit-pyspy-reader",
                                            daemon=True)
            self._reader.start()
        if self.target_is_parent:
            self._open_gate()
        return self._wait_attached(attach_timeout_s) if self.capture else ""

    def _open_gate(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        if ptrace_scope() == 1:
            self._ptracer_set = not set_ptracer(self.proc.pid)
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.lines.append(line)
            if ATTACHED_MARK in line:
                self._attached.set()

    def _wait_attached(self, timeout_s: float) -> str:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while not self._attached.wait(0.02):
            if self.proc.poll() is not None:
                if self._reader is not None:
                    self._reader.join(2.0)
                if self._attached.is_set() or self.proc.returncode == 0:
                    return ""  # attached (a `dump` ends by itself with 0)
                self._clear_ptracer()
                return failure_line("\n".join(self.lines))
            if time.monotonic() > deadline:
                return ""  # still starting (slow symbol loading): let it run
        return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout_s: float | None = None) -> int:
        """Until py-spy ends by itself (--duration, or the target exited)."""
        assert self.proc is not None
        code = self.proc.wait(timeout_s)
        self._finish()
        return code

    def stop(self, timeout_s: float = 30.0) -> str:
        """SIGINT (py-spy writes its file on Ctrl-C) and wait; '' or what went wrong."""
        assert self.proc is not None
        why = ""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                why = f"py-spy did not stop within {timeout_s:g} s after SIGINT; killed"
        self._finish()
        return why

    def _finish(self) -> None:
        if self._reader is not None:
            self._reader.join(5.0)
        self._clear_ptracer()

    def _clear_ptracer(self) -> None:
        if self._ptracer_set:
            set_ptracer(0)
            self._ptracer_set = False


def probe_parent_attach(exe: str, timeout_s: float = 15.0) -> str:
    """Can a py-spy child read this process? `py-spy dump` of our own pid, through the
    same gate and PR_SET_PTRACER handling as a recording. '' when it can, else why not."""
    args = [exe, "dump", "--nonblocking", "--pid", str(os.getpid())]
    spy = PySpyProcess(args, target_is_parent=True)
    why = spy.start(attach_timeout_s=timeout_s)
    if spy.running:
        spy.stop(5.0)
        return why or f"py-spy dump did not finish within {timeout_s:g} s"
    spy.wait(5.0)
    return why
