"""Where a level's stacks went (the folded files are the artifact; nothing in memory)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KernelRow:
    name: str  # kernel (or op) name as torch reports it
    device_time_us: float  # self device time, all calls
    calls: int  # launches
    share: float  # of all kernels' device time, 0..1


@dataclass(frozen=True)
class KernelsInfo:
    available: bool  # False: not on CUDA, or the profiler failed (see reason)
    reason: str = ""
    rows: list[KernelRow] = field(default_factory=list)  # top kernels, largest first
    folded_path: str | None = None  # self device time (us) by Python stack + op


@dataclass(frozen=True, kw_only=True)
class StacksInfo:
    sampler_used: str  # "py-spy" or "thread" (the in-process fallback)
    reason: str  # why not py-spy when sampler_used == "thread"
    folded_path: str | None
    speedscope_path: str | None
    svg_path: str | None
    num_samples: int  # one per busy thread per tick
    duration_s: float
    rate_hz: float
    native: bool
    warning: str = ""
    kernels: KernelsInfo | None = None  # CUDA only
