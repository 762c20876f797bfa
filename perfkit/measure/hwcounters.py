"""Hardware (and software) counters of one process during a level, read with `perf stat`.

    source = PerfStat(pid, engine_tid); why = source.start()
    source.mark()          # the measured phase starts (after the warm-up)
    readings = source.stop()

`perf stat -x, -I 100 --per-thread -p PID -e EVENTS` prints each thread's counts every
100 ms; the readings sum the intervals that end after `mark()` (good to one interval at
the start), for the whole process and for the engine thread. perf attaches to the
threads alive when it starts: threads started later are not counted.

Events: instructions and cycles (IPC), L1D and LLC load misses, and, where the PMU has
an event for it, HITM loads (a load that found the line modified in another core's
cache: cache-line contention, what `perf c2c` samples). The software events (task-clock,
context switches, CPU migrations, page faults) exist without a PMU. An event perf
reports as `<not supported>` is None, never 0 (`<not counted>`: the thread did not run
in that interval, 0); without a PMU (a
virtual machine) `unavailable` says so.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from perfkit.measure.threads import name_native

HARDWARE = ("cycles", "instructions", "L1-dcache-load-misses", "LLC-load-misses")
SOFTWARE = ("task-clock", "context-switches", "cpu-migrations", "page-faults")
HITM_NAMES = ("xsnp_hitm", "xsnp_fwd", "hitm")  # Intel: mem_load_l3_hit_retired.xsnp_*
INTERVAL_MS = 100
NO_PMU_VM = "no hardware performance counters (virtual machine)"
NO_PMU = "no hardware performance counters (no CPU PMU in /sys/bus/event_source/devices)"


@dataclass
class CounterReadings:
    window_s: float  # seconds of the intervals summed
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


def parse_line(line: str) -> tuple[float, int | None, str, float | None] | None:
    """One `perf stat -x, -I` line -> (interval end s, tid or None, event, value or None)."""
    f = [x.strip() for x in line.split(",")]
    if len(f) < 4:
        return None
    try:
        t = float(f[0])
    except ValueError:
        return None
    tid = None
    if "-" in f[1] and f[1].rsplit("-", 1)[1].isdigit():  # --per-thread: "comm-tid"
        tid = int(f[1].rsplit("-", 1)[1])
        f = [f[0], *f[2:]]
    if len(f) < 4:
        return None
    if f[1] == "<not counted>":  # the thread did not run in the interval: nothing counted
        return t, tid, f[3], 0.0
    return t, tid, f[3], None if f[1].startswith("<") else _number(f[1])


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class PerfStat:
    def __init__(self, pid: int, engine_tid: int | None, exe: str | None = None) -> None:
        self.pid, self.engine_tid = pid, engine_tid
        self.exe = exe or shutil.which("perf")
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[tuple[float, str]] = []  # (perf_counter on arrival, line)
        self._reader: threading.Thread | None = None
        self._mark_s = 0.0
        self._pmu = ""
        self._hitm = ""

    def start(self) -> str:
        if self.exe is None:
            return "perf not found (Debian: apt-get install linux-perf)"
        self._pmu = pmu_reason()
        self._hitm = "" if self._pmu else hitm_event(self.exe)
        events = list(SOFTWARE) + ([] if self._pmu else list(HARDWARE))
        events += [self._hitm] if self._hitm else []
        args = [self.exe, "stat", "-x,", "-I", str(INTERVAL_MS), "--per-thread",
                "-p", str(self.pid), "-e", ",".join(events)]
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True, start_new_session=True)
        except OSError as err:
            return f"cannot run perf: {err.strerror or err}"
        self._reader = threading.Thread(target=self._read, name="perfkit-perf-reader",
                                        daemon=True)
        self._reader.start()
        self._mark_s = time.perf_counter()
        return ""

    def mark(self) -> None:
        self._mark_s = time.perf_counter()

    def _read(self) -> None:
        name_native("pk-perf-reader")
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self._lines.append((time.perf_counter(), line))

    def stop(self) -> CounterReadings:
        proc = self._proc
        if proc is None:
            return CounterReadings(0.0, unavailable={"counters": "perf stat did not start"})
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._reader is not None:
            self._reader.join(10)
        return readings(self._lines, self._mark_s, self.engine_tid, self._pmu, self._hitm)


def readings(lines: list[tuple[float, str]], mark_s: float, engine_tid: int | None,
             pmu: str, hitm: str) -> CounterReadings:
    """Sum the intervals that end after mark_s (perf's relative times placed on
    perf_counter by the earliest arrival: a line arrives just after its interval ends)."""
    parsed = [(arrived, p) for arrived, line in lines if (p := parse_line(line)) is not None]
    if not parsed:
        why = next((x.strip() for _, x in lines if x.strip()), "no output")
        return CounterReadings(0.0, unavailable={"counters": f"perf stat: {why}"})
    origin = min(arrived - p[0] for arrived, p in parsed)
    process: dict[str, float | None] = {}
    engine: dict[str, float | None] = {}
    ends = sorted({p[0] for _, p in parsed if origin + p[0] > mark_s})
    for _, (t, tid, event, value) in parsed:
        if origin + t <= mark_s:
            continue
        for into, take in ((process, True), (engine, tid == engine_tid)):
            if take:
                into[event] = None if value is None or into.get(event, 0.0) is None \
                    else (into.get(event) or 0.0) + value
    first = max(mark_s - origin, min(ends, default=0.0) - INTERVAL_MS / 1e3)
    window = (ends[-1] - first) if ends else 0.0
    unavailable = {"hardware": pmu} if pmu else {}
    if not pmu and not hitm:
        unavailable["hitm"] = "no HITM load event on this PMU (perf list names none)"
    elif pmu:
        unavailable["hitm"] = pmu
    return CounterReadings(max(window, 0.0), process, engine, unavailable, hitm)
