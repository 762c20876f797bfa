"""This process's CPU, scheduling and memory counters over one benchmark level.

OS counters are read only at `start()` and `stop()`; nothing polls in between,
so the sampler costs two reads per level whatever the level's length.

Sources (Linux):
- CPU time, context switches, page faults: `getrusage(RUSAGE_SELF)`. It sums
  every thread, including threads that exited during the level, and costs
  ~2 µs. (psutil's `num_ctx_switches()` reads /proc/<pid>/status, which counts
  the main thread only, and costs ~45 µs: measured 3 vs 203 switches for a
  worker thread that slept 200 times.)
- Run-queue wait: `/proc/self/task/<tid>/schedstat` (on-CPU ns, run-queue wait ns,
  timeslices), summed over the threads alive at `stop()`; a thread that exits
  during the level takes its share with it. psutil does not read schedstat.
- RSS: psutil `memory_info().rss` now; `ru_maxrss` (KiB on Linux) for the peak.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfkit import clock

if TYPE_CHECKING:
    import psutil

_TASK_DIR = "/proc/self/task"


@dataclass
class ProcSnapshot:
    """Cumulative process counters at one instant; subtract two with `delta`."""

    t_s: float  # perfkit.clock.now() when taken (lockstep pauses excluded, as is their CPU)
    user_s: float  # CPU seconds in user mode, all threads
    system_s: float  # CPU seconds in the kernel on our behalf, all threads
    num_minor_faults: int  # page faults served without I/O (first touch, COW)
    num_major_faults: int  # page faults that read from disk
    num_voluntary_ctx_switches: int  # a thread blocked (I/O, lock, sleep)
    num_involuntary_ctx_switches: int  # a thread was preempted while runnable


@dataclass
class ProcDelta:
    """What happened between two snapshots (b - a); every field is >= 0."""

    wall_s: float
    user_s: float
    system_s: float
    num_minor_faults: int
    num_major_faults: int
    num_voluntary_ctx_switches: int
    num_involuntary_ctx_switches: int


@dataclass
class SchedStat:
    """Sum of /proc/self/task/*/schedstat over threads; cumulative since each thread began."""

    on_cpu_ns: int
    run_queue_wait_ns: int  # runnable but waiting for a CPU
    num_timeslices: int
    per_thread: dict[int, tuple[int, int, int]]  # tid -> (on_cpu_ns, wait_ns, timeslices)


@dataclass
class ProcStats:
    """One level's process figures; deltas between start() and stop() unless noted."""

    available: bool
    reason: str  # why not, when unavailable (or what was left out)
    wall_s: float
    user_s: float
    system_s: float
    system_share: float  # system_s / (user_s + system_s), in [0, 1]; 0.0 with no CPU time
    cpu_per_wall: float  # (user_s + system_s) / wall_s: cores kept busy on average
    num_voluntary_ctx_switches: int
    num_involuntary_ctx_switches: int
    num_minor_faults: int
    num_major_faults: int
    # From schedstat over threads alive at stop(); None when schedstat is unreadable.
    on_cpu_s: float | None
    run_queue_wait_s: float | None
    num_timeslices: int | None
    num_threads: int  # threads whose schedstat was summed (0 when unreadable)
    rss_start_bytes: int
    rss_end_bytes: int
    peak_rss_bytes: int  # process-lifetime high-water mark (ru_maxrss), not reset per level

    @classmethod
    def wall_only(cls, wall_s: float, reason: str) -> ProcStats:
        """Only the wall time is known: the samplers were turned off."""
        return cls(
            available=False,
            reason=reason,
            wall_s=wall_s,
            user_s=0.0,
            system_s=0.0,
            system_share=0.0,
            cpu_per_wall=0.0,
            num_voluntary_ctx_switches=0,
            num_involuntary_ctx_switches=0,
            num_minor_faults=0,
            num_major_faults=0,
            on_cpu_s=None,
            run_queue_wait_s=None,
            num_timeslices=None,
            num_threads=0,
            rss_start_bytes=0,
            rss_end_bytes=0,
            peak_rss_bytes=0,
        )


def snapshot() -> ProcSnapshot:
    """Cheap (~2 µs, one getrusage call): fit to take once per engine step."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    paused_user, paused_system = clock.paused_cpu_s()  # 0.0 unless in lockstep
    return ProcSnapshot(
        t_s=clock.now(),
        user_s=ru.ru_utime - paused_user,
        system_s=ru.ru_stime - paused_system,
        num_minor_faults=ru.ru_minflt,
        num_major_faults=ru.ru_majflt,
        num_voluntary_ctx_switches=ru.ru_nvcsw,
        num_involuntary_ctx_switches=ru.ru_nivcsw,
    )


def delta(a: ProcSnapshot, b: ProcSnapshot) -> ProcDelta:
    """Counters from a to b; rusage never goes backwards, so each field is >= 0."""
    return ProcDelta(
        wall_s=b.t_s - a.t_s,
        user_s=b.user_s - a.user_s,
        system_s=b.system_s - a.system_s,
        num_minor_faults=b.num_minor_faults - a.num_minor_faults,
        num_major_faults=b.num_major_faults - a.num_major_faults,
        num_voluntary_ctx_switches=b.num_voluntary_ctx_switches - a.num_voluntary_ctx_switches,
        num_involuntary_ctx_switches=(
            b.num_involuntary_ctx_switches - a.num_involuntary_ctx_switches
        ),
    )


def read_schedstat(task_dir: str = _TASK_DIR) -> SchedStat | None:
    """Sum schedstat over live threads; None when the kernel does not expose it."""
    per_thread: dict[int, tuple[int, int, int]] = {}
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"{task_dir}/{tid}/schedstat", encoding="ascii") as f:
                cpu, wait, slices = (int(x) for x in f.read().split()[:3])
        except (OSError, ValueError):
            continue  # the thread exited between listdir and open, or no schedstat
        per_thread[int(tid)] = (cpu, wait, slices)
    if not per_thread:
        return None
    return SchedStat(
        on_cpu_ns=sum(v[0] for v in per_thread.values()),
        run_queue_wait_ns=sum(v[1] for v in per_thread.values()),
        num_timeslices=sum(v[2] for v in per_thread.values()),
        per_thread=per_thread,
    )


def schedstat_delta(a: SchedStat, b: SchedStat) -> tuple[int, int, int]:
    """(on_cpu_ns, wait_ns, timeslices) spent by b's threads since a; a new thread counts whole."""
    cpu = wait = slices = 0
    for tid, (c1, w1, s1) in b.per_thread.items():
        c0, w0, s0 = a.per_thread.get(tid, (0, 0, 0))
        if c1 < c0:  # tid reused by a new thread: its counters restarted
            c0, w0, s0 = 0, 0, 0
        cpu, wait, slices = cpu + c1 - c0, wait + w1 - w0, slices + s1 - s0
    return cpu, wait, slices


def _rss_bytes(proc: psutil.Process) -> int:
    import psutil

    try:
        return int(proc.memory_info().rss)
    except psutil.Error:
        return 0


class ProcSampler:
    """start() ... stop() around one level; stop() returns that level's ProcStats."""

    def __init__(self) -> None:
        import psutil  # here: result files read ProcStats without loading psutil

        self._proc = psutil.Process()
        self._start: ProcSnapshot | None = None
        self._sched_start: SchedStat | None = None
        self._rss_start_bytes = 0

    def start(self) -> None:
        self._rss_start_bytes = _rss_bytes(self._proc)
        self._sched_start = read_schedstat()
        self._start = snapshot()  # last, so the level's window opens here

    def stop(self) -> ProcStats:
        end = snapshot()  # first, so the reads below fall outside the window
        if self._start is None:
            return ProcStats.wall_only(0.0, "ProcSampler.stop() called before start()")
        d = delta(self._start, end)
        sched_end = read_schedstat()
        cpu_s = d.user_s + d.system_s
        stats = ProcStats(
            available=True,
            reason="",
            wall_s=d.wall_s,
            user_s=d.user_s,
            system_s=d.system_s,
            system_share=d.system_s / cpu_s if cpu_s > 0 else 0.0,
            cpu_per_wall=cpu_s / d.wall_s if d.wall_s > 0 else 0.0,
            num_voluntary_ctx_switches=d.num_voluntary_ctx_switches,
            num_involuntary_ctx_switches=d.num_involuntary_ctx_switches,
            num_minor_faults=d.num_minor_faults,
            num_major_faults=d.num_major_faults,
            on_cpu_s=None,
            run_queue_wait_s=None,
            num_timeslices=None,
            num_threads=0,
            rss_start_bytes=self._rss_start_bytes,
            rss_end_bytes=_rss_bytes(self._proc),
            peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        )
        if self._sched_start is None or sched_end is None:
            stats.reason = "no /proc/self/task/*/schedstat: run-queue wait not measured"
        else:
            cpu_ns, wait_ns, slices = schedstat_delta(self._sched_start, sched_end)
            stats.on_cpu_s, stats.run_queue_wait_s = cpu_ns / 1e9, wait_ns / 1e9
            stats.num_timeslices, stats.num_threads = slices, len(sched_end.per_thread)
        return stats


class ThreadWaits:
    """The calling thread's cumulative run-queue wait in seconds (schedstat field 2),
    read through a file kept open: ~2 us a read, cheap enough for every engine step.
    Make it in the thread to be watched; `open()` is None where the kernel has no
    schedstat for it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls) -> ThreadWaits | None:
        path = f"{_TASK_DIR}/{threading.get_native_id()}/schedstat"
        try:
            waits = cls(os.open(path, os.O_RDONLY))
        except OSError:
            return None
        return waits if waits() is not None else None

    def __call__(self) -> float | None:
        try:
            return int(os.pread(self._fd, 96, 0).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        os.close(self._fd)
