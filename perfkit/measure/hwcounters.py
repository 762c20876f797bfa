"""Hardware (and software) counters of one process during a level, read with `perf stat`.

    source = PerfStat(pid, engine_tid); why = source.start()
    source.mark()          # the measured phase starts (after the warm-up)
    readings = source.stop()

`perf stat -x, --per-thread -p PID -e EVENTS -D -1 --control fifo:CTL -o FILE` attaches
with its counters disabled; `mark()` enables them through the control fifo and `stop()`
disables them, so the totals (per thread, summed for the process; the engine thread's
apart) cover the measured phase exactly. perf writes to a file read after it exits: no
thread of this process wakes for it during the level (perf >= 5.10 has --control). perf
attaches to the threads alive when it starts: threads started later are not counted.

Events: instructions and cycles (IPC), L1D and LLC load misses, and, where the PMU has
an event for it, HITM loads (a load that found the line modified in another core's
cache: cache-line contention, what `perf c2c` samples). The software events (task-clock,
context switches, CPU migrations, page faults) exist without a PMU. An event perf
reports as `<not supported>` is None, never 0 (`<not counted>`: the thread did not run
in that interval, 0); without a PMU (a
virtual machine) `unavailable` says so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Protocol

HARDWARE = ("cycles", "instructions", "L1-dcache-load-misses", "LLC-load-misses")
SOFTWARE = ("task-clock", "context-switches", "cpu-migrations", "page-faults")
HITM_NAMES = ("xsnp_hitm", "xsnp_fwd", "hitm")  # Intel: mem_load_l3_hit_retired.xsnp_*
NO_PMU_VM = "no hardware performance counters (virtual machine)"
NO_PMU = "no hardware performance counters (no CPU PMU in /sys/bus/event_source/devices)"


@dataclass
class CounterReadings:
    window_s: float  # seconds the counters were enabled (the measured phase)
    process: dict[str, float | None] = field(default_factory=dict)  # event -> total
    engine: dict[str, float | None] = field(default_factory=dict)  # the engine thread's
    unavailable: dict[str, str] = field(default_factory=dict)  # "hardware"|"hitm"|... -> why
    hitm_event: str = ""  # the PMU's HITM event counted, "" when none


class CounterSource(Protocol):
    def start(self) -> str: ...
    def mark(self) -> None: ...
    def stop(self) -> CounterReadings: ...


def pmu_reason() -> str:
    """"" where a CPU PMU is exposed; else why there are no hardware counters."""
    devices = "/sys/bus/event_source/devices"
    try:
        names = os.listdir(devices)
    except OSError:
        return f"no {devices} (not Linux, or sysfs not mounted)"
    if any(n in ("cpu", "armv8_pmuv3") or n.startswith(("cpu_", "armv8")) for n in names):
        return ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            virtual = " hypervisor" in f.read()
    except OSError:
        virtual = False
    return NO_PMU_VM if virtual else NO_PMU


def hitm_event(perf: str) -> str:
    """The PMU's HITM load event as `perf list` names it, or ""."""
    try:
        out = subprocess.run([perf, "list", "--no-desc"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for word in out.split():
        if any(h in word.lower() for h in HITM_NAMES):
            return word
    return ""


def parse_line(line: str) -> tuple[int | None, str, float | None] | None:
    """One `perf stat -x, --per-thread` line -> (tid or None, event, value or None)."""
    f = [x.strip() for x in line.split(",")]
    if len(f) < 3 or f[0].startswith("#"):
        return None
    tid = None
    if "-" in f[0] and f[0].rsplit("-", 1)[1].isdigit():  # --per-thread: "comm-tid"
        tid = int(f[0].rsplit("-", 1)[1])
        f = f[1:]
    if len(f) < 3 or not f[2] or f[2][0].isdigit():
        return None
    if f[0] == "<not counted>":  # the thread did not run while counting: nothing counted
        return tid, f[2], 0.0
    return tid, f[2], None if f[0].startswith("<") else _number(f[0])


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class PerfStat:
    def __init__(self, pid: int, engine_tid: int | None, exe: str | None = None) -> None:
        self.pid, self.engine_tid = pid, engine_tid
        self.exe = exe or shutil.which("perf")
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="perfkit-perf-")
        self._out = os.path.join(self._dir.name, "stat.csv")
        self._ctl: int | None = None  # the control fifo, open for writing
        self._on_s: float | None = None  # perf_counter when the counters were enabled
        self._window_s = 0.0
        self._pmu = ""
        self._hitm = ""

    def start(self) -> str:
        if self.exe is None:
            return "perf not found (Debian: apt-get install linux-perf)"
        self._pmu = pmu_reason()
        self._hitm = "" if self._pmu else hitm_event(self.exe)
        events = list(SOFTWARE) + ([] if self._pmu else list(HARDWARE))
        events += [self._hitm] if self._hitm else []
        ctl = os.path.join(self._dir.name, "ctl")
        os.mkfifo(ctl)
        args = [self.exe, "stat", "-x,", "--per-thread", "-p", str(self.pid), "-D", "-1",
                "--control", f"fifo:{ctl}", "-o", self._out, "-e", ",".join(events)]
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          start_new_session=True)
        except OSError as err:
            return f"cannot run perf: {err.strerror or err}"
        return self._open_control(ctl)

    def _open_control(self, ctl: str, timeout_s: float = 10.0) -> str:
        """Open the fifo once perf reads it (ENXIO until then); else why perf did not."""
        deadline = time.monotonic() + timeout_s
        assert self._proc is not None
        while self._ctl is None:
            try:
                self._ctl = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    return self._failed()
                time.sleep(0.02)
        return ""

    def _failed(self) -> str:
        assert self._proc is not None
        if self._proc.poll() is None:
            self._proc.kill()
        _, err = self._proc.communicate()
        lines = [x.strip() for x in err.decode(errors="replace").splitlines() if x.strip()]
        self._proc = None
        why = lines[0] if lines else "it did not open its control fifo"
        return f"perf stat: {why}" + (" (perf >= 5.10 has --control)" if "control" in why
                                      else "")

    def _command(self, word: str) -> None:
        if self._ctl is not None:
            with contextlib.suppress(OSError):
                os.write(self._ctl, f"{word}\n".encode())

    def mark(self) -> None:
        """The measured phase starts: the counters count from here."""
        self._command("enable")
        self._on_s = time.perf_counter()

    def stop(self) -> CounterReadings:
        proc = self._proc
        if proc is None:
            self._dir.cleanup()
            return CounterReadings(0.0, unavailable={"counters": "perf stat did not start"})
        self._command("disable")
        if self._on_s is not None:
            self._window_s = time.perf_counter() - self._on_s
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if self._ctl is not None:
            os.close(self._ctl)
        try:
            with open(self._out, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = err.decode(errors="replace")
        self._dir.cleanup()
        return readings(text.splitlines(), self._window_s, self.engine_tid, self._pmu,
                        self._hitm)


def readings(lines: list[str], window_s: float, engine_tid: int | None, pmu: str, hitm: str
             ) -> CounterReadings:
    """Per-thread totals -> the process's and the engine thread's; an event perf could not
    count is None in both."""
    parsed = [p for line in lines if (p := parse_line(line)) is not None]
    if not parsed:
        why = next((x.strip() for x in lines if x.strip() and not x.startswith("#")
                    and "Events" not in x), "no counts written")
        return CounterReadings(0.0, unavailable={"counters": f"perf stat: {why}"})
    process: dict[str, float | None] = {}
    engine: dict[str, float | None] = {}
    for tid, event, value in parsed:
        for into, take in ((process, True), (engine, tid == engine_tid)):
            if take:
                into[event] = None if value is None or into.get(event, 0.0) is None \
                    else (into.get(event) or 0.0) + value
    unavailable = {"hardware": pmu} if pmu else {}
    if not pmu and not hitm:
        unavailable["hitm"] = "no HITM load event on this PMU (perf list names none)"
    elif pmu:
        unavailable["hitm"] = pmu
    return CounterReadings(window_s, process, engine, unavailable, hitm)
