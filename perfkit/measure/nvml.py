"""GPU memory and utilization from NVML, sampled by a daemon thread during one level.

Per sample the thread makes two cheap calls (memory info ~12 µs, utilization
~3 µs, REFERENCES.md "NVML and the torch allocator"). The per-process query
(`nvmlDeviceGetComputeRunningProcesses`, ~4.5 ms under a driver lock) runs at
most once per `process_interval_s` (1 s by default), never at the sample rate.
NVML reports host pids: inside a container our pid may not be listed, and
`peak_process_bytes` then stays None.

The thread never raises: a failing call is counted (`num_errors`, `last_error`)
and the loop goes on. ctypes drops the GIL during each NVML call.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_HZ = 20.0
PROCESS_INTERVAL_S = 1.0
MAX_STORED_SAMPLES = 72_000  # one hour at 20 Hz; aggregates still cover every sample
JOIN_TIMEOUT_S = 5.0


@dataclass
class NvmlSample:
    t_s: float  # monotonic seconds since start()
    used_bytes: int  # device memory in use, all processes
    util_pct: int | None  # kernel-busy % over the driver's last 1/6-1 s; None if the call failed
    # This pid's GPU memory; None unless queried at this sample (rate-limited) and reported.
    process_bytes: int | None


@dataclass
class NvmlStats:
    available: bool
    reason: str  # why not, when unavailable; or why the thread was left running
    device_name: str
    memory_total_bytes: int
    peak_used_bytes: int  # max of used_bytes over samples
    mean_used_bytes: int  # mean of used_bytes over samples, rounded
    peak_process_bytes: int | None  # None: our pid never listed with a usedGpuMemory
    mean_util_pct: float | None  # None: no utilization reading succeeded
    # The first MAX_STORED_SAMPLES; "timeline" in the result JSON.
    samples: list[NvmlSample] = field(default_factory=list, metadata={"json": "timeline"})
    num_samples: int = 0  # samples taken (stored or not)
    hz: float = 0.0  # requested rate
    num_process_queries: int = 0  # running-process calls made (each ~4.5 ms on a GPU)
    num_errors: int = 0  # NVML calls that raised inside the thread
    last_error: str = ""
    overhead_s: float = 0.0  # wall seconds spent inside NVML calls by the thread
    thread_cpu_s: float = 0.0  # CPU seconds the sampling thread used, all work included

    @classmethod
    def unavailable(cls, reason: str, hz: float = 0.0) -> NvmlStats:
        return cls(
            available=False,
            reason=reason,
            device_name="",
            memory_total_bytes=0,
            peak_used_bytes=0,
            mean_used_bytes=0,
            peak_process_bytes=None,
            mean_util_pct=None,
            hz=hz,
        )


def check_hz(hz: float) -> None:
    if not hz > 0:  # also rejects NaN
        raise ValueError(f"NVML sampling rate must be > 0 Hz, got {hz}")
    if hz > MAX_HZ:
        raise ValueError("NVML sampling above 20 Hz costs driver time; use <= 20")


def load_pynvml() -> tuple[Any, str]:
    """(module, "") or (None, why not)."""
    try:
        import pynvml
    except ImportError as err:
        return None, f"nvidia-ml-py (pynvml) not importable: {err}"
    return pynvml, ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _SamplingLoop:
    """One level's thread and the state it writes; stop() reads it only after join()."""

    def __init__(
        self, nvml: Any, handle: Any, stats: NvmlStats, pid: int, process_interval_s: float
    ) -> None:
        self.nvml, self.handle, self.stats, self.pid = nvml, handle, stats, pid
        self.process_interval_s = process_interval_s
        self.halt = threading.Event()
        self.sum_used_bytes = 0
        self.sum_util_pct = 0
        self.num_util = 0  # samples with a utilization reading
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self.run, name="perfkit-nvml", daemon=True)

    def finish(self) -> NvmlStats:
        """Halt the thread, wait for it, and fill in the means."""
        self.halt.set()
        self.thread.join(JOIN_TIMEOUT_S)
        stats = self.stats
        if self.thread.is_alive():
            stats.reason = f"sampling thread still inside an NVML call after {JOIN_TIMEOUT_S} s"
        else:
            _shutdown(self.nvml)
        stats.samples = list(stats.samples)  # a copy, in case the thread is still alive
        if stats.num_samples:
            stats.mean_used_bytes = round(self.sum_used_bytes / stats.num_samples)
        if self.num_util:
            stats.mean_util_pct = self.sum_util_pct / self.num_util
        return stats

    def run(self) -> None:
        cpu0 = time.thread_time()
        period_s = 1.0 / self.stats.hz
        next_t = next_process_t = self.t0
        while True:
            now = time.monotonic()
            query_process = now >= next_process_t
            if query_process:
                next_process_t = now + self.process_interval_s
            try:
                self.sample(now - self.t0, query_process)
            except Exception as err:  # a bug here must not kill the thread silently
                self.note_error(f"sampler: {err!r}")
            next_t += period_s
            now = time.monotonic()
            if next_t < now:  # fell behind: skip to the next tick on the grid, no burst
                next_t = now + period_s - (now - next_t) % period_s
            if self.halt.wait(next_t - now):
                break
        self.stats.thread_cpu_s = time.thread_time() - cpu0

    def sample(self, t_s: float, query_process: bool) -> None:
        mem = self.call(self.nvml.nvmlDeviceGetMemoryInfo, self.handle)
        if mem is None:
            return  # no memory reading, no sample
        util = self.call(self.nvml.nvmlDeviceGetUtilizationRates, self.handle)
        util_pct = None if util is None else int(util.gpu)
        process_bytes = self.process_bytes() if query_process else None
        self.add(NvmlSample(t_s, int(mem.used), util_pct, process_bytes))

    def process_bytes(self) -> int | None:
        self.stats.num_process_queries += 1
        procs = self.call(self.nvml.nvmlDeviceGetComputeRunningProcesses, self.handle)
        for p in procs or ():
            if getattr(p, "pid", None) == self.pid:
                used = getattr(p, "usedGpuMemory", None)
                return None if used is None else int(used)
        return None

    def add(self, sample: NvmlSample) -> None:
        s = self.stats
        s.num_samples += 1
        if len(s.samples) < MAX_STORED_SAMPLES:
            s.samples.append(sample)
        self.sum_used_bytes += sample.used_bytes
        s.peak_used_bytes = max(s.peak_used_bytes, sample.used_bytes)
        if sample.util_pct is not None:
            self.sum_util_pct += sample.util_pct
            self.num_util += 1
        if sample.process_bytes is not None:
            s.peak_process_bytes = max(s.peak_process_bytes or 0, sample.process_bytes)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args), timed into overhead_s; None (and an error counted) if it raises."""
        t = time.perf_counter()
        try:
            return fn(*args)
        except Exception as err:
            self.note_error(f"{getattr(fn, '__name__', fn)}: {err}")
            return None
        finally:
            self.stats.overhead_s += time.perf_counter() - t

    def note_error(self, text: str) -> None:
        self.stats.num_errors += 1
        self.stats.last_error = text


def _shutdown(nvml: Any) -> None:
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()


class NvmlSampler:
    """start() ... stop() around one level; stop() returns the level's NvmlStats.

    `nvml` is a module-like object with the pynvml API (tests inject a fake);
    None imports pynvml. stop() may be called again and returns the same stats.
    """

    def __init__(
        self,
        hz: float = 10.0,
        device_index: int = 0,
        nvml: Any = None,
        pid: int | None = None,
        process_interval_s: float = PROCESS_INTERVAL_S,
    ) -> None:
        check_hz(hz)
        if not process_interval_s > 0:
            raise ValueError(f"process_interval_s must be > 0, got {process_interval_s}")
        self.hz = hz
        self._device_index = device_index
        self._nvml = nvml
        self._pid = os.getpid() if pid is None else pid
        self._process_interval_s = process_interval_s
        self._loop: _SamplingLoop | None = None
        self._result: NvmlStats | None = None

    def start(self) -> None:
        if self._loop is not None:
            raise RuntimeError("NvmlSampler already started; call stop() first")
        self._result = None
        nvml, why = (self._nvml, "") if self._nvml is not None else load_pynvml()
        if nvml is None:
            self._result = NvmlStats.unavailable(why, self.hz)
            return
        try:
            nvml.nvmlInit()
        except Exception as err:
            why = f"nvmlInit failed: {err} (no NVIDIA driver?)"
            self._result = NvmlStats.unavailable(why, self.hz)
            return
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(self._device_index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            total_bytes = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
        except Exception as err:
            _shutdown(nvml)
            why = f"NVML device {self._device_index}: {err}"
            self._result = NvmlStats.unavailable(why, self.hz)
            return
        stats = NvmlStats.unavailable("", self.hz)
        stats.available, stats.device_name, stats.memory_total_bytes = True, name, total_bytes
        self._loop = _SamplingLoop(nvml, handle, stats, self._pid, self._process_interval_s)
        self._loop.thread.start()

    def stop(self) -> NvmlStats:
        if self._result is not None:
            return self._result
        if self._loop is None:
            return NvmlStats.unavailable("NvmlSampler.stop() called before start()", self.hz)
        self._result = self._loop.finish()
        self._loop = None
        return self._result
