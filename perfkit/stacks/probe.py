"""What the process waited on during a level, with times: for the tail breakdown.

    probe = TailProbe(); probe.start() ... probe.stop() -> ProbeData

Two sources, both on perfkit.clock (the engine's step clock):
- GC pauses as (start, end) intervals from `gc.callbacks` in the collecting thread
  (the level's GcStats has totals only; the tail needs when each pause happened).
- Cumulative counters ticked by a daemon thread at `rate_hz`: the engine thread's
  run-queue wait (`/proc/thread-self/schedstat` of the thread that started the probe,
  the one that steps the engine) and the process's minor+major page faults
  (`/proc/self/stat`). A request's share is the counter's rise between the ticks
  around its lifetime, so a value is good to one tick (1 / rate_hz).
Where /proc is missing, `counters_reason` says so and those lists stay empty.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from dataclasses import dataclass, field
from typing import Any

from perfkit import clock
from perfkit.measure.proc import ThreadWaits

MAX_PAUSES = 200_000  # gen-0 collections under heavy allocation: bounded memory


@dataclass
class ProbeData:
    gc_start_s: list[float] = field(default_factory=list)  # each pause's start
    gc_end_s: list[float] = field(default_factory=list)  # and end (wall clock)
    gc_generation: list[int] = field(default_factory=list)
    tick_s: list[float] = field(default_factory=list)  # counter ticks, in order
    run_delay_s: list[float] = field(default_factory=list)  # cumulative, engine thread
    faults: list[int] = field(default_factory=list)  # cumulative, whole process
    counters_reason: str = ""  # why the tick lists are empty; "" when they are not


def read_faults(path: str = "/proc/self/stat") -> int | None:
    """minflt + majflt of the process (fields 10 and 12 of /proc/self/stat)."""
    try:
        with open(path, encoding="ascii") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[7]) + int(rest[9])
    except (OSError, IndexError, ValueError):
        return None


class TailProbe:
    def __init__(self, rate_hz: float = 100.0) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
        self.interval_s = 1.0 / rate_hz
        self.data = ProbeData()
        self._pending: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waits: ThreadWaits | None = None  # the engine thread's run-queue wait

    def start(self) -> None:
        self.data = ProbeData()
        self._waits = ThreadWaits.open()  # the caller's thread: the one that steps the engine
        if self._waits is None or read_faults() is None:
            self.data.counters_reason = "no /proc schedstat or stat on this machine"
        else:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="perfkit-tail-probe",
                                            daemon=True)
            self._thread.start()
        gc.callbacks.append(self._on_gc)

    def stop(self) -> ProbeData:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._tick()
        if self._waits is not None:
            self._waits.close()
            self._waits = None
        return self.data

    def _run(self) -> None:
        while True:
            self._tick()
            if self._stop.wait(self.interval_s):
                return

    def _tick(self) -> None:
        delay = self._waits() if self._waits is not None else None
        faults = read_faults()
        if delay is None or faults is None:
            return
        d = self.data
        d.tick_s.append(clock.now())
        d.run_delay_s.append(delay)
        d.faults.append(faults)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = clock.now()
        if phase == "start":
            self._pending = now
            return
        start, self._pending = self._pending, None
        d = self.data
        if start is None or len(d.gc_start_s) >= MAX_PAUSES:
            return
        d.gc_start_s.append(start)
        d.gc_end_s.append(now)
        d.gc_generation.append(int(info.get("generation", 0)))
