"""The torch CUDA caching allocator's view of memory (`torch.cuda.memory_stats()`).

Key names are those of torch's allocator stats ("<stat>.all.current|peak",
REFERENCES.md "NVML and the torch allocator"). Reading them costs no device
sync. Allocator slack (reserved - allocated) is memory the cache holds but no
tensor uses; `inactive_split_bytes` reads ~0 under expandable segments even
when fragmented, so it is a lower bound on fragmentation, not a measure of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class CudaMemStats:
    available: bool
    reason: str  # why not, when unavailable
    reserved_bytes: int  # held by the caching allocator (segments from cudaMalloc)
    allocated_bytes: int  # handed out to tensors; <= reserved_bytes
    slack_bytes: int  # reserved - allocated: cached, not in use
    inactive_split_bytes: int  # free pieces of split blocks
    peak_reserved_bytes: int  # since the last reset_peak_memory_stats (the level's start)
    peak_allocated_bytes: int
    # Cumulative since process start from cuda_memory_stats(); over the level from CudaMemSampler.
    num_alloc_retries: int  # cudaMalloc failed, cache flushed, retried
    num_ooms: int  # out-of-memory errors raised by the allocator

    @classmethod
    def unavailable(cls, reason: str) -> CudaMemStats:
        return cls(
            available=False,
            reason=reason,
            reserved_bytes=0,
            allocated_bytes=0,
            slack_bytes=0,
            inactive_split_bytes=0,
            peak_reserved_bytes=0,
            peak_allocated_bytes=0,
            num_alloc_retries=0,
            num_ooms=0,
        )


def _torch() -> Any:
    import torch

    return torch


def cuda_unavailable_reason() -> str:
    """'' when CUDA can be used, else why not."""
    try:
        torch = _torch()
    except ImportError as err:  # pragma: no cover - torch is a dependency
        return f"torch not importable: {err}"
    if torch.cuda.is_available():
        return ""
    why = "torch is a CPU-only build" if torch.version.cuda is None else "no CUDA device visible"
    return f"torch.cuda.is_available() is False ({why})"


def from_memory_stats(raw: dict[str, Any]) -> CudaMemStats:
    """Pick our fields out of a torch.cuda.memory_stats() dict; absent keys read 0."""

    def get(key: str) -> int:
        return int(raw.get(key, 0))

    reserved, allocated = get("reserved_bytes.all.current"), get("allocated_bytes.all.current")
    return CudaMemStats(
        available=True,
        reason="",
        reserved_bytes=reserved,
        allocated_bytes=allocated,
        slack_bytes=reserved - allocated,
        inactive_split_bytes=get("inactive_split_bytes.all.current"),
        peak_reserved_bytes=get("reserved_bytes.all.peak"),
        peak_allocated_bytes=get("allocated_bytes.all.peak"),
        num_alloc_retries=get("num_alloc_retries"),
        num_ooms=get("num_ooms"),
    )


def cuda_memory_stats(device: Any = None) -> CudaMemStats:
    """Allocator figures for `device` (None: the current device), or why there are none."""
    why = cuda_unavailable_reason()
    if why:
        return CudaMemStats.unavailable(why)
    try:
        return from_memory_stats(_torch().cuda.memory_stats(device))
    except Exception as err:  # a bad device index, a broken driver
        return CudaMemStats.unavailable(f"torch.cuda.memory_stats failed: {err}")


class CudaMemSampler:
    """start() resets the allocator's peaks; stop() reads them: the peaks over the level.

    The reset is process-wide: other code reading the peaks sees them restart.
    Retry and OOM counts in the result are those of the level (stop - start).
    """

    def __init__(self, device: Any = None) -> None:
        self._device = device
        self._start: CudaMemStats | None = None

    def start(self) -> None:
        self._start = None
        if cuda_unavailable_reason():
            return
        try:
            _torch().cuda.reset_peak_memory_stats(self._device)
        except Exception:
            return  # stop() reports what memory_stats says, or why it can't
        self._start = cuda_memory_stats(self._device)

    def stop(self) -> CudaMemStats:
        end = cuda_memory_stats(self._device)
        if not end.available or self._start is None or not self._start.available:
            if end.available:
                end.reason = "peaks and counts not reset at start: they cover more than the level"
            return end
        end.num_alloc_retries -= self._start.num_alloc_retries
        end.num_ooms -= self._start.num_ooms
        return end
