"""bpftrace beside a level: start it on one process, read its events, stop it.

    tracer = BpfTracer(spec); why = tracer.start()   # "" once every probe is attached
    ... the level runs ...
    trace = tracer.stop()                            # BpfTrace: events and dumps

The program is measure/bpf_script.py's; bpftrace writes its output to a file, read after
it stops. Its times are CLOCK_MONOTONIC nanoseconds, the clock of time.perf_counter on
Linux: the BEGIN stamp must fall between a perf_counter reading taken before bpftrace
started and one taken when the stamp was seen, else the trace's times are shifted by the
measured offset and `clock_note` says so.
`unavailable()` gives the reason eBPF cannot run here ("" when it can) and
`tracepoints_reason()` whether the futex and syscall tracepoints can be attached (they
need tracefs; the GIL's uprobes need only the symbols).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from perfkit.measure.bpf_script import ScriptSpec, script

ATTACH_TIMEOUT_S = 60.0  # bpftrace compiles its program first: seconds on a loaded machine
STOP_TIMEOUT_S = 15.0
MAX_EVENTS = 400_000  # per kind: bounded memory under a storm of waits
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
# (tid, start s, duration s, waker tid or 0, the futex's return: 0 woken, -110 timed out)
Wait = tuple[int, float, float, int, int]


def unavailable() -> str:
    """"" where bpftrace can run here; else why not, with the fix."""
    if not sys.platform.startswith("linux"):
        return "eBPF needs Linux"
    if shutil.which("bpftrace") is None:
        return "bpftrace not found (Debian/Ubuntu: apt-get install bpftrace)"
    if os.geteuid() != 0:
        return "eBPF needs root (bpftrace loads kernel programs): run perfkit as root"
    return ""


def tracepoints_reason() -> str:
    """"" when the syscall tracepoints can be attached; else why not."""
    for root in TRACEFS:
        if os.path.isdir(f"{root}/events"):
            if os.path.isdir(f"{root}/events/syscalls/sys_enter_futex"):
                return ""
            return "the kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS)"
    return ("tracefs is not mounted, so the futex and syscall tracepoints cannot be "
            "attached (as root: mount -t tracefs nodev /sys/kernel/tracing)")


@dataclass
class Dump:
    t_s: float  # perf_counter seconds when the totals were read
    final: bool  # the END dump (SIGINT), not the measured phase's start ("M")
    maps: dict[str, dict[str, int]] = field(default_factory=dict)  # "@name" -> key -> value


@dataclass
class BpfTrace:
    """What bpftrace reported; times already on perf_counter (offset applied)."""

    gil_waits: list[Wait] = field(default_factory=list)  # the engine's, >= min_wait_ns
    lock_waits: list[Wait] = field(default_factory=list)
    dumps: list[Dump] = field(default_factory=list)
    attached_s: float | None = None  # perf_counter when every probe was attached
    offset_s: float = 0.0  # added to bpftrace's times: 0.0 when the clocks agree
    clock_note: str = ""  # "" when the BEGIN stamp checked out
    error: str = ""  # bpftrace's error, when it failed or ended early
    dropped: int = 0  # events beyond MAX_EVENTS


class BpfTracer:
    """bpftrace writes to files (its output, its errors), read when it attaches and after
    it stops: no thread of this process wakes for it during the level (a reader thread
    would take the GIL from the engine at every line)."""

    def __init__(self, spec: ScriptSpec, exe: str | None = None) -> None:
        self.spec = spec
        self.exe = exe or shutil.which("bpftrace") or "bpftrace"
        self.trace = BpfTrace()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="perfkit-bpf-")
        self._out = os.path.join(self._dir.name, "out.json")
        self._err = os.path.join(self._dir.name, "err.txt")
        self._before_s = 0.0

    def start(self, timeout_s: float = ATTACH_TIMEOUT_S) -> str:
        """"" once bpftrace has attached every probe (its BEGIN line is out); else why not."""
        self._before_s = time.perf_counter()
        try:
            with open(self._err, "wb") as err:
                self._proc = subprocess.Popen(
                    [self.exe, "-f", "json", "-o", self._out, "-e", script(self.spec)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    start_new_session=True)  # Ctrl-C in the terminal is perfkit's, not its
        except OSError as err_:
            return f"cannot run bpftrace: {err_.strerror or err_}"
        deadline = time.monotonic() + timeout_s
        while (stamp := self._begin_stamp()) is None:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                return self.trace.error or f"bpftrace did not attach within {timeout_s:g} s"
            time.sleep(0.02)
        self._check_clock(stamp)
        return ""

    def _begin_stamp(self) -> float | None:
        try:
            with open(self._out, encoding="utf-8", errors="replace") as f:
                head = f.read(4096)
        except OSError:
            return None
        for line in head.splitlines():
            f_ = _printf_fields(line)
            if f_[:1] == ["T"] and len(f_) > 1 and f_[1].isdigit():
                return int(f_[1]) / 1e9
        return None

    def stop(self) -> BpfTrace:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # bpftrace runs END: the last totals
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._read_out()
        if proc is not None and proc.returncode not in (0, -signal.SIGINT) \
                and not self.trace.error:
            self.trace.error = self._error_line() or f"bpftrace exited {proc.returncode}"
        self._dir.cleanup()
        return self.trace

    def _error_line(self) -> str:
        try:
            with open(self._err, encoding="utf-8", errors="replace") as f:
                lines = f.read(20_000).splitlines()
        except OSError:
            return ""
        errors = [s for s in lines if "ERROR" in s and "RLIMIT_MEMLOCK" not in s]
        return f"bpftrace: {errors[0].strip()}" if errors else ""

    def _read_out(self) -> None:
        if not os.path.exists(self._out):
            return
        with open(self._out, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("type") == "printf":
                    for text in str(msg.get("data", "")).splitlines():
                        self._printf(text.split())
                elif msg.get("type") == "map" and self.trace.dumps:
                    self.trace.dumps[-1].maps.update(msg.get("data") or {})

    def _printf(self, f: list[str]) -> None:
        t = self.trace
        if not f:
            return
        kind, nums = f[0], [int(x) for x in f[1:] if x.lstrip("-").isdigit()]
        if kind in ("M", "E") and nums:
            t.dumps.append(Dump(nums[0] / 1e9 + t.offset_s, kind == "E"))
        elif kind in ("G", "F") and len(nums) >= 5:
            into = t.gil_waits if kind == "G" else t.lock_waits
            if len(into) >= MAX_EVENTS:
                t.dropped += 1
                return
            into.append((nums[0], nums[1] / 1e9 + t.offset_s, nums[2] / 1e9, nums[3], nums[4]))

    def _check_clock(self, stamp_s: float) -> None:
        """The BEGIN stamp falls between bpftrace's start and its detection (a 20 ms poll)
        when the clocks are the same; else the trace is shifted by the difference."""
        now = time.perf_counter()
        t = self.trace
        if not self._before_s <= stamp_s <= now:
            t.offset_s = now - stamp_s
            t.clock_note = (f"bpftrace's clock is not perf_counter's: its times were shifted "
                            f"by {t.offset_s:+.6f} s (good to the 20 ms attach poll)")
        t.attached_s = stamp_s + t.offset_s


def _printf_fields(line: str) -> list[str]:
    """The words of a -f json printf line ([] for anything else)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return []
    return str(msg.get("data", "")).split() if msg.get("type") == "printf" else []


