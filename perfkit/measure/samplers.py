"""Every sampler around one benchmark level, started and stopped together.

Order: the NVML thread and the CUDA peak reset start first and the process
counters last, so the process window holds the level and the samplers'
running cost (NVML thread, gc callback) but not their start-up (nvmlInit can
take a good part of a second on a GPU host). stop() mirrors it.

`enabled=False` keeps the same calls and result shape but measures only wall
time: the lead runs a level both ways to measure what the samplers cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from perfkit.measure.cuda_mem import CudaMemSampler, CudaMemStats
from perfkit.measure.gc import GcRecorder, GcStats
from perfkit.measure.nvml import PROCESS_INTERVAL_S, NvmlSampler, NvmlStats
from perfkit.measure.proc import ProcSampler, ProcStats
from perfkit.measure.system import SystemSampler, SystemStats

DISABLED = "samplers disabled for this level"


@dataclass
class LevelMeasurements:
    enabled: bool  # False: only proc.wall_s was measured, the rest says DISABLED
    proc: ProcStats
    gc: GcStats
    nvml: NvmlStats
    cuda: CudaMemStats
    system: SystemStats  # the whole machine: other processes' CPU, steal, load


class LevelSamplers:
    """start() ... stop() around one level; reusable for the next level.

    `nvml_hz=0` turns NVML sampling off alone. `device_index` is NVML's index,
    which ignores CUDA_VISIBLE_DEVICES; the allocator stats are torch's current device's.
    """

    def __init__(
        self,
        nvml_hz: float,
        enabled: bool = True,
        device_index: int = 0,
        nvml: Any = None,  # module-like pynvml stand-in for tests; None imports pynvml
        process_interval_s: float = PROCESS_INTERVAL_S,
    ) -> None:
        self.enabled = enabled
        self.nvml_hz = nvml_hz
        self._nvml: NvmlSampler | None = None
        if enabled and nvml_hz != 0:
            self._nvml = NvmlSampler(nvml_hz, device_index, nvml, None, process_interval_s)
        self._cuda = CudaMemSampler()  # torch's current device
        self._gc = GcRecorder()
        self._proc = ProcSampler()
        self._system = SystemSampler()
        self._t0_s = 0.0  # monotonic start, used when disabled

    def start(self) -> None:
        self._t0_s = time.monotonic()
        if not self.enabled:
            return
        if self._nvml is not None:
            self._nvml.start()
        self._cuda.start()
        self._gc.start()
        self._system.start()
        self._proc.start()

    def stop(self) -> LevelMeasurements:
        if not self.enabled:
            wall_s = time.monotonic() - self._t0_s
            return LevelMeasurements(
                enabled=False,
                proc=ProcStats.wall_only(wall_s, DISABLED),
                gc=GcStats.disabled(DISABLED),
                nvml=NvmlStats.unavailable(DISABLED, self.nvml_hz),
                cuda=CudaMemStats.unavailable(DISABLED),
                system=SystemStats.unavailable(DISABLED, wall_s),
            )
        proc = self._proc.stop()
        system = self._system.stop()
        gc_stats = self._gc.stop()
        cuda = self._cuda.stop()
        if self._nvml is None:
            nvml = NvmlStats.unavailable("NVML sampling off (nvml_hz=0)")
        else:
            nvml = self._nvml.stop()
        return LevelMeasurements(True, proc, gc_stats, nvml, cuda, system)
