"""Garbage-collector pauses during one benchmark level, timed through `gc.callbacks`.

The collector calls every callback with phase "start" before a collection and
"stop" after it, in the thread that triggered it and holding the GIL, and
collections never nest; so one pending start time is enough. Finalizers run
inside a collection and may let another thread call `stop()` mid-collection:
a "stop" phase without a matching "start" is then ignored.

Two clocks per pause: wall (perfkit.clock) and the collecting thread's CPU time
(thread_time). On a busy machine the collector can be descheduled mid-collection;
the wall pause then includes the run-queue wait, the CPU pause does not. The CPU
pause is the collector's real cost; the wall pause is what a request waiting on the
GIL felt. Rules judge the collector by the CPU pause.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field
from typing import Any

from perfkit import clock

DEFAULT_MAX_PAUSES = 10_000


@dataclass
class GcStats:
    available: bool
    reason: str  # why not, when unavailable
    count: int  # collections finished inside the level, all generations
    total_s: float  # sum of their pauses
    max_s: float  # longest single pause (wall clock); <= total_s
    # The collecting thread's CPU time over each pause: not inflated by descheduling.
    total_cpu_s: float = 0.0
    max_cpu_s: float = 0.0
    max_generation: int | None = None  # generation of the longest CPU pause
    by_generation_cpu_s: dict[str, float] = field(default_factory=dict)  # gen -> CPU s
    by_generation: dict[str, int] = field(default_factory=dict)  # "0".."2" -> collections
    # In order; the first max_pauses only. Not in the result JSON (count/total/max are).
    pauses_s: list[float] = field(default_factory=list, metadata={"json": False})
    num_pauses_dropped: int = 0  # count - len(pauses_s)
    num_collected: int = 0  # objects freed by those collections
    num_uncollectable: int = 0  # objects found unreachable but not freeable

    @classmethod
    def disabled(cls, reason: str) -> GcStats:
        return cls(available=False, reason=reason, count=0, total_s=0.0, max_s=0.0)


class GcRecorder:
    """start() registers a gc callback, stop() removes it and returns the level's GcStats.

    Costs two perf_counter() and two thread_time() reads per collection. stop() may be called again:
    it returns the same stats.
    """

    def __init__(self, max_pauses: int = DEFAULT_MAX_PAUSES) -> None:
        if max_pauses < 0:
            raise ValueError(f"max_pauses must be >= 0, got {max_pauses}")
        self._max_pauses = max_pauses
        self._stats = GcStats.disabled("GcRecorder.stop() called before start()")
        self._pending_t: float | None = None  # perf_counter at the open "start" phase
        self._pending_cpu = 0.0  # thread_time at the open "start" phase
        self._registered = False

    def start(self) -> None:
        self._unregister()
        self._stats = GcStats(available=True, reason="", count=0, total_s=0.0, max_s=0.0)
        self._pending_t = None
        gc.callbacks.append(self._on_gc)
        self._registered = True

    def stop(self) -> GcStats:
        self._unregister()
        return self._stats

    def _unregister(self) -> None:
        if self._registered:
            # Bound methods are equal only when bound to this same recorder.
            with contextlib.suppress(ValueError):  # someone else already removed it
                gc.callbacks.remove(self._on_gc)
            self._registered = False

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now, cpu = clock.now(), time.thread_time()
        if phase == "start":
            self._pending_t, self._pending_cpu = now, cpu
            return
        if self._pending_t is None or not self._registered:
            return
        self._record(now - self._pending_t, max(cpu - self._pending_cpu, 0.0), info)
        self._pending_t = None

    def _record(self, pause_s: float, cpu_s: float, info: dict[str, Any]) -> None:
        s = self._stats
        s.count += 1
        s.total_s += pause_s
        s.max_s = max(s.max_s, pause_s)
        gen = str(info.get("generation", "?"))
        s.total_cpu_s += cpu_s
        s.by_generation_cpu_s[gen] = s.by_generation_cpu_s.get(gen, 0.0) + cpu_s
        if cpu_s >= s.max_cpu_s:
            s.max_cpu_s = cpu_s
            s.max_generation = int(gen) if gen.isdigit() else None
        s.by_generation[gen] = s.by_generation.get(gen, 0) + 1
        s.num_collected += int(info.get("collected", 0))
        s.num_uncollectable += int(info.get("uncollectable", 0))
        if len(s.pauses_s) < self._max_pauses:
            s.pauses_s.append(pause_s)
        else:
            s.num_pauses_dropped += 1
