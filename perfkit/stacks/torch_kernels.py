"""On CUDA: torch.profiler over one window -> top kernels by device time + folded stacks.

    with cuda_kernel_profile(out_dir / "level-4.kernels.folded") as kp:
        run_level()
    kp.rows, kp.folded_path  # filled after the block; kp.available False on CPU

The folded file has one line per (Python stack + op) with its self device time
in microseconds as the integer count, frames named like py-spy's
(`name (file:line)`) so the same summary and renderers apply. torch only keeps
Python stacks with `with_stack=True` plus the experimental verbose config.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfkit.result.stacks import KernelRow
from perfkit.stacks.folded import Folded, write_folded
from perfkit.stacks.thread_sampler import path_prefixes, short_filename

_TORCH_FRAME_RE = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<name>.*)$")


@dataclass
class KernelProfile:
    available: bool  # False: not on CUDA, or the profiler failed (see reason)
    reason: str = ""  # why unavailable
    rows: list[KernelRow] = field(default_factory=list)  # top kernels, largest first
    folded_path: Path | None = None  # self device time (us) by Python stack + op

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["folded_path"] = None if self.folded_path is None else str(self.folded_path)
        return out


def torch_frame(entry: str, prefixes: list[str]) -> str:
    """'/x/site-packages/perfkit/engine/model.py(88): forward' -> 'forward (perfkit/...:88)'."""
    match = _TORCH_FRAME_RE.match(entry)
    if match is None:
        return entry.replace(";", "_")
    return f"{match['name']} ({short_filename(match['file'], prefixes)}:{match['line']})"


def folded_device_time(events: Any) -> Folded:
    """Self device time (us, rounded) per Python stack + op, from profiler FunctionEvents."""
    prefixes = path_prefixes()
    stacks: Counter[str] = Counter()
    for evt in events:
        time_us = int(getattr(evt, "self_device_time_total", 0) or 0)
        if time_us <= 0 or not evt.stack:
            continue
        frames = [torch_frame(e, prefixes) for e in reversed(evt.stack)]
        stacks[";".join([*frames, evt.name.replace(";", "_")])] += time_us
    return dict(stacks)


def top_kernels(averages: Any, top: int) -> list[KernelRow]:
    """Device-side entries (kernels) of key_averages() by self device time."""
    rows = [a for a in averages if getattr(a, "self_device_time_total", 0) > 0]
    kernels = [a for a in rows if str(getattr(a, "device_type", "")).endswith("CUDA")]
    rows = sorted(kernels or rows, key=lambda a: -a.self_device_time_total)
    total = sum(a.self_device_time_total for a in rows) or 1.0
    return [KernelRow(a.key, float(a.self_device_time_total), int(a.count),
                      a.self_device_time_total / total) for a in rows[:top]]


def _profiler() -> Any:
    from torch._C._profiler import _ExperimentalConfig
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True,
                   experimental_config=_ExperimentalConfig(verbose=True))


@contextmanager
def cuda_kernel_profile(folded_path: Path, top: int = 15) -> Iterator[KernelProfile]:
    import torch

    result = KernelProfile(False)
    if not torch.cuda.is_available():
        result.reason = "no CUDA device: torch.profiler kernel table is CUDA-only"
        yield result
        return
    prof = _profiler()
    prof.__enter__()
    try:
        yield result
    finally:
        torch.cuda.synchronize()
        prof.__exit__(None, None, None)
        _fill(result, prof, Path(folded_path), top)


def _fill(result: KernelProfile, prof: Any, folded_path: Path, top: int) -> None:
    try:
        result.rows = top_kernels(prof.key_averages(), top)
        write_folded(folded_path, folded_device_time(prof.events()))
        result.available, result.folded_path = True, folded_path
    except Exception as err:  # a profiler quirk must not lose the level
        result.reason = f"torch.profiler post-processing failed: {type(err).__name__}: {err}"
