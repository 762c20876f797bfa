"""The whole machine's CPU over one level, apart from this process: was it contended?

Sources (Linux), read only at `start()` and `stop()`:
- `/proc/stat` first line: jiffies (USER_HZ, 1/100 s) per state summed over CPUs:
  user nice system idle iowait irq softirq steal guest guest_nice. guest and
  guest_nice are already inside user and nice, so they are not added again.
  busy = user + nice + system + irq + softirq; steal = time a hypervisor ran
  someone else while this VM wanted the CPU.
- This process's CPU: `getrusage(RUSAGE_SELF)` (all its threads, perfkit's own
  engine, event loop and samplers).
- `/proc/loadavg`: runnable + uninterruptible tasks, 1-minute average.

others_s = busy - own: CPU seconds other processes took during the level. It is
what tells "the machine was busy" (someone else's tests, a CPU hog) from "perfkit's
own threads oversubscribe the cores" (run-queue wait with nobody else running).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

_STAT = "/proc/stat"
_LOADAVG = "/proc/loadavg"
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class CpuTimes:
    """Cumulative machine-wide CPU seconds at one instant (all CPUs summed)."""

    t_s: float  # time.monotonic()
    busy_s: float  # user + nice + system + irq + softirq
    idle_s: float  # idle + iowait
    steal_s: float
    own_s: float  # this process: user + system, all threads


@dataclass
class SystemStats:
    """One level's machine-wide CPU; deltas between start() and stop()."""

    available: bool
    reason: str  # why not, when unavailable
    wall_s: float
    num_cpus: int  # CPUs this machine's /proc/stat counts
    busy_s: float  # CPU seconds every process took (all CPUs)
    own_s: float  # of which this process (perfkit: engine, event loop, samplers)
    others_s: float  # busy_s - own_s, >= 0: other processes
    steal_s: float  # the hypervisor gave our CPUs to another guest
    load_1m: float | None  # /proc/loadavg at stop(); None when unreadable

    @property
    def others_cores(self) -> float:
        """Cores kept busy by other processes, on average over the level."""
        return self.others_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def steal_share(self) -> float:
        """Stolen CPU time / (CPUs x wall)."""
        cap = self.num_cpus * self.wall_s
        return self.steal_s / cap if cap > 0 else 0.0

    @classmethod
    def unavailable(cls, reason: str, wall_s: float = 0.0) -> SystemStats:
        return cls(available=False, reason=reason, wall_s=wall_s, num_cpus=0, busy_s=0.0,
                   own_s=0.0, others_s=0.0, steal_s=0.0, load_1m=None)


def parse_stat(text: str) -> tuple[int, float, float, float] | None:
    """(num_cpus, busy_s, idle_s, steal_s) from /proc/stat text; None if malformed."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("cpu "):
        return None
    try:
        f = [int(x) for x in lines[0].split()[1:]]
    except ValueError:
        return None
    f += [0] * (8 - len(f))
    user, nice, system, idle, iowait, irq, softirq, steal = f[:8]
    num_cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit())
    busy = user + nice + system + irq + softirq
    return num_cpus, busy / _HZ, (idle + iowait) / _HZ, steal / _HZ


def read_times(stat_path: str = _STAT) -> tuple[int, CpuTimes] | None:
    try:
        with open(stat_path, encoding="ascii") as f:
            parsed = parse_stat(f.read())
    except OSError:
        return None
    if parsed is None:
        return None
    ru = resource.getrusage(resource.RUSAGE_SELF)
    num_cpus, busy, idle, steal = parsed
    return num_cpus, CpuTimes(time.monotonic(), busy, idle, steal, ru.ru_utime + ru.ru_stime)


def read_load(path: str = _LOADAVG) -> float | None:
    try:
        with open(path, encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def system_delta(num_cpus: int, a: CpuTimes, b: CpuTimes, load_1m: float | None
                 ) -> SystemStats:
    busy, own = max(b.busy_s - a.busy_s, 0.0), max(b.own_s - a.own_s, 0.0)
    return SystemStats(available=True, reason="", wall_s=b.t_s - a.t_s, num_cpus=num_cpus,
                       busy_s=busy, own_s=own, others_s=max(busy - own, 0.0),
                       steal_s=max(b.steal_s - a.steal_s, 0.0), load_1m=load_1m)


class SystemSampler:
    """start() ... stop() around one level; two reads of /proc/stat (~20 µs each)."""

    def __init__(self, stat_path: str = _STAT, loadavg_path: str = _LOADAVG) -> None:
        self._stat_path, self._loadavg_path = stat_path, loadavg_path
        self._start: tuple[int, CpuTimes] | None = None
        self._t0_s = 0.0

    def start(self) -> None:
        self._t0_s = time.monotonic()
        self._start = read_times(self._stat_path)

    def stop(self) -> SystemStats:
        end = read_times(self._stat_path)
        if self._start is None or end is None:
            return SystemStats.unavailable(f"{self._stat_path} unreadable",
                                           time.monotonic() - self._t0_s)
        return system_delta(end[0], self._start[1], end[1], read_load(self._loadavg_path))
