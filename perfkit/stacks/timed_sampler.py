"""The in-process sampler with a time on every sample: what the tail stacks are cut from.

`TimedSampler` counts folded stacks as ThreadSampler does and also keeps, per sample,
its tick time (perf_counter, the engine's step clock) and the id of its stack, in two
parallel lists (ints and floats, no object per sample). perfkit's own measuring threads
(named "perfkit-...": this sampler, the tail probe) and the progress bar's refresh thread
are left out. py-spy's raw output has no
times, so the tail stacks always come from this sampler (beside py-spy when py-spy
records the whole level).

Off-CPU: at each tick a thread that did not run since the last one and is not runnable
(stacks/offcpu.py) is waiting; its stack goes to `offcpu` (folded counts, no times), not
to the on-CPU counts. `offcpu_reason` says why that count stays empty ("" when it can be
told on this machine).

GC pauses: the collector holds the GIL, so no tick lands inside a pause. The sampler
registers a gc callback; pause time, summed until it fills an interval, becomes the
samples the ticks would have taken, with the collecting thread's Python stack and a leaf frame
`GC_FRAME` naming the generation (what py-spy --native shows as the collector's C frames).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
from collections import Counter
from types import FrameType
from typing import Any

from perfkit.measure.threads import own_thread
from perfkit.stacks.offcpu import CpuStates
from perfkit.stacks.thread_sampler import ThreadSampler

GC_FRAME = "gc.collect[gen{gen}] (<gc>:0)"  # synthetic leaf: the collector at work


class TimedSampler(ThreadSampler):
    def __init__(self, rate_hz: float = 100.0) -> None:
        super().__init__(rate_hz)
        self.stack_ids: dict[str, int] = {}  # folded stack -> id
        self.sample_s: list[float] = []  # each sample's time
        self.sample_stack: list[int] = []  # each sample's stack id
        self._gc_start: float | None = None
        self._gc_frame: FrameType | None = None
        self._gc_carry = 0.0  # ticks' worth of GC pause not yet turned into samples
        self._lock = threading.Lock()
        self.offcpu: Counter[str] = Counter()  # folded stack -> samples waiting (off-CPU)
        self._states = CpuStates(self.interval_s)
        self.offcpu_reason = self._states.reason  # "" when off-CPU stacks are recorded

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        super().start()

    def stop(self) -> dict[str, int]:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        return super().stop()

    def stacks_by_id(self) -> list[str]:
        out = [""] * len(self.stack_ids)
        for stack, i in self.stack_ids.items():
            out[i] = stack
        return out

    def sample_once(self) -> None:
        threads = {t.ident: t for t in threading.enumerate()}
        now = time.perf_counter()
        self.num_ticks += 1
        for ident, frame in sys._current_frames().items():
            thread = threads.get(ident)
            if thread is not None and own_thread(thread):
                continue
            state = self._states.state(ident, None if thread is None else thread.native_id)
            if state != "on" and not (state == "off" or self.idle):
                continue
            stack = self.fold(frame)
            if stack and state == "off":
                self.offcpu[stack] += 1
            if stack and (state == "on" or self.idle):  # idle: every thread, as py-spy --idle
                self._add(stack, now, 1)

    def _add(self, stack: str, at_s: float, n: int, step_s: float = 0.0) -> None:
        with self._lock:
            self.counts[stack] += n
            sid = self.stack_ids.setdefault(stack, len(self.stack_ids))
            for k in range(n):
                self.sample_s.append(at_s + k * step_s)
                self.sample_stack.append(sid)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if threading.get_ident() == self._thread.ident:
            return  # the sampler's own collections (it may hold the lock): not the engine's
        if phase == "start":
            self._gc_start, self._gc_frame = now, sys._getframe(1)
            return
        start, frame = self._gc_start, self._gc_frame
        self._gc_start = self._gc_frame = None
        if start is None or frame is None:
            return
        self._gc_carry += (now - start) / self.interval_s  # short pauses add up
        n = int(self._gc_carry)
        if n < 1:
            return
        self._gc_carry -= n
        base = self.fold(frame)
        leaf = GC_FRAME.format(gen=info.get("generation", "?"))
        self._add(f"{base};{leaf}" if base else leaf, start, n, self.interval_s)
