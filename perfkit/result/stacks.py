"""Where a level's stacks went (the folded files are the artifact; nothing in memory).

Paths are recorded relative to the result file's folder (absolute when the sweep wrote
no result file), so the result folder can move (a CI artifact) and keep its stacks.
Results written before that hold paths relative to the working directory they ran in;
`stack_path_candidates` finds both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


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


@dataclass(frozen=True)
class FrameGrowth:
    frame: str  # "name (file)": a function, all its lines together
    tail_share: float  # of the tail steps' samples with it on the stack, 0..1
    median_share: float  # the same in the median steps

    @property
    def growth(self) -> float:
        return self.tail_share - self.median_share


@dataclass(frozen=True)
class TailStacksInfo:
    """Stacks of the level's slowest steps (> p99 step time) against its median steps."""

    tail_folded_path: str | None  # level-X.tail.folded
    median_folded_path: str | None  # level-X.median.folded
    diff_svg_path: str | None  # level-X.tail-diff.svg: widths from the tail, red grows
    num_tail_steps: int
    num_median_steps: int
    num_tail_samples: int
    num_median_samples: int
    step_p99_s: float
    growing: list[FrameGrowth] = field(default_factory=list)  # largest growth first


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
    tail: TailStacksInfo | None = None  # in-process levels (timed thread samples)
    offcpu_folded_path: str | None = None  # level-X.offcpu.folded: where threads waited
    offcpu_samples: int = 0  # one per waiting (not running, not runnable) thread per tick
    offcpu_reason: str = ""  # off-CPU stacks unavailable: why ("" when recorded)


def _recorded(path: str | None, folder: Path | None) -> str | None:
    if path is None:
        return None
    absolute = Path(path).absolute()
    return str(absolute) if folder is None else os.path.relpath(absolute, folder.absolute())


def paths_relative_to(info: StacksInfo, folder: Path | None) -> StacksInfo:
    """`info` with every stack path relative to `folder` (the result file's), or absolute
    when there is no result file (folder None)."""
    kernels = info.kernels
    if kernels is not None:
        kernels = replace(kernels, folded_path=_recorded(kernels.folded_path, folder))
    tail = info.tail
    if tail is not None:
        tail = replace(tail, tail_folded_path=_recorded(tail.tail_folded_path, folder),
                       median_folded_path=_recorded(tail.median_folded_path, folder),
                       diff_svg_path=_recorded(tail.diff_svg_path, folder))
    return replace(info, tail=tail, folded_path=_recorded(info.folded_path, folder),
                   speedscope_path=_recorded(info.speedscope_path, folder),
                   svg_path=_recorded(info.svg_path, folder), kernels=kernels,
                   offcpu_folded_path=_recorded(info.offcpu_folded_path, folder))


def stack_path_candidates(recorded: str, result_file: Path | None) -> list[Path]:
    """Where a recorded stack path may be, best first: against the result file's folder,
    then as written (an old result's working-directory-relative path, or absolute)."""
    path = Path(recorded)
    if path.is_absolute() or result_file is None:
        return [path]
    return [result_file.parent / path, path]
