"""On-CPU or off-CPU: what a thread was doing at a sampler tick.

A tick asks two things of each thread:
- its CPU clock (`pthread_getcpuclockid`): did it run at least IDLE_SHARE of the interval
  since the last tick? Yes: on-CPU (what py-spy without --idle keeps).
- its state in `/proc/self/task/<tid>/stat` (Linux): 'R' is running or runnable; 'S'
  (sleeping: a lock, sleep, select, the GIL), 'D' (uninterruptible: disk, a page fault)
  and the rest are waiting.
A thread that did not run and is not 'R' is off-CPU: its stack is where it waits. A
thread that did not run but is 'R' is runnable and waiting for a core; it is neither
(the run-queue wait of the tail breakdown counts that). The first tick of a thread has no
clock to compare with and counts for neither.

The state alone cannot decide on-CPU: the sampler holds the GIL while it reads, so a thread
running Python reads 'S' (waiting for the GIL) at that instant; the clock decides.
Where either is missing (not Linux) off-CPU stacks are unavailable (`offcpu_reason`).
"""

from __future__ import annotations

import os
import threading
import time

IDLE_SHARE = 0.05  # a thread counts as busy if it ran >= 5% of the sampling interval
RUNNING = "R"


def read_state(native_id: int) -> str | None:
    """The one-letter state of a thread of this process; None without /proc."""
    try:
        with open(f"/proc/self/task/{native_id}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError, ValueError):
        return None


def offcpu_reason() -> str:
    """"" where off-CPU stacks can be told apart here, else why not."""
    try:
        time.clock_gettime_ns(time.pthread_getcpuclockid(threading.get_ident()))
    except (AttributeError, OSError):
        return "no per-thread CPU clock (pthread_getcpuclockid) on this platform"
    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/stat"):
        return "no /proc/self/task on this machine (not Linux)"
    return ""


class CpuStates:
    """Per-thread CPU clocks between ticks, one instance per sampler."""

    def __init__(self, interval_s: float) -> None:
        self.min_ns = IDLE_SHARE * interval_s * 1e9
        self._cpu_ns: dict[int, int] = {}  # thread ident -> CPU clock at the last tick
        self.reason = offcpu_reason()  # "" where "off" can be told; else never "off"

    def state(self, ident: int, native_id: int | None) -> str | None:
        """"on", "off", or None: the thread's first tick, or runnable (waiting for a core).
        Without a per-thread clock every thread is "on" (ThreadSampler's rule)."""
        try:
            now = time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
        except (AttributeError, OSError):
            return "on"
        before = self._cpu_ns.get(ident)
        self._cpu_ns[ident] = now
        if before is None:
            return None
        if now - before >= self.min_ns:
            return "on"
        if self.reason or native_id is None:
            return None
        return None if read_state(native_id) in (None, RUNNING) else "off"
