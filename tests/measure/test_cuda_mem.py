import json
from dataclasses import asdict

import pytest
import torch

from perfkit.measure.cuda_mem import CudaMemSampler, cuda_memory_stats, from_memory_stats

MIB = 1024**2

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")


@no_cuda
def test_cpu_only_is_unavailable_with_reason():
    stats = cuda_memory_stats()
    assert not stats.available
    assert "torch.cuda.is_available() is False" in stats.reason
    assert stats.reserved_bytes == stats.num_ooms == 0
    json.dumps(asdict(stats))


@no_cuda
def test_sampler_on_cpu_does_not_crash():
    s = CudaMemSampler()
    s.start()
    stats = s.stop()
    assert not stats.available and stats.reason


RAW = {
    "reserved_bytes.all.current": 100 * MIB,
    "allocated_bytes.all.current": 60 * MIB,
    "inactive_split_bytes.all.current": 3 * MIB,
    "reserved_bytes.all.peak": 120 * MIB,
    "allocated_bytes.all.peak": 90 * MIB,
    "num_alloc_retries": 4,
    "num_ooms": 1,
}


def test_fields_come_from_the_allocator_keys():
    s = from_memory_stats(RAW)
    assert s.available
    assert (s.reserved_bytes, s.allocated_bytes, s.slack_bytes) == (100 * MIB, 60 * MIB, 40 * MIB)
    assert s.inactive_split_bytes == 3 * MIB
    assert (s.peak_reserved_bytes, s.peak_allocated_bytes) == (120 * MIB, 90 * MIB)
    assert (s.num_alloc_retries, s.num_ooms) == (4, 1)
    assert from_memory_stats({}).reserved_bytes == 0  # allocator not yet used


class FakeCuda:
    """torch.cuda stand-in whose counters move between start and stop."""

    def __init__(self):
        self.raw = dict(RAW)
        self.num_resets = 0

    def is_available(self):
        return True

    def reset_peak_memory_stats(self, device=None):
        self.num_resets += 1

    def memory_stats(self, device=None):
        return dict(self.raw)


def test_sampler_resets_peaks_and_reports_level_counts(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(torch, "cuda", fake)
    s = CudaMemSampler()
    s.start()
    assert fake.num_resets == 1
    fake.raw["num_alloc_retries"] = 7
    fake.raw["num_ooms"] = 1
    fake.raw["allocated_bytes.all.peak"] = 95 * MIB
    stats = s.stop()
    assert stats.available and stats.reason == ""
    assert (stats.num_alloc_retries, stats.num_ooms) == (3, 0)
    assert stats.peak_allocated_bytes == 95 * MIB
    assert cuda_memory_stats().num_alloc_retries == 7  # the plain call stays cumulative


def test_memory_stats_failure_is_unavailable(monkeypatch):
    fake = FakeCuda()

    def broken(device=None):
        raise RuntimeError("invalid device ordinal")

    fake.memory_stats = broken
    monkeypatch.setattr(torch, "cuda", fake)
    stats = cuda_memory_stats(5)
    assert not stats.available and "invalid device ordinal" in stats.reason


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_peak_over_level():
    s = CudaMemSampler()
    s.start()
    x = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    del x
    stats = s.stop()
    assert stats.available
    assert stats.peak_allocated_bytes >= 64 * MIB
    assert stats.peak_reserved_bytes >= stats.peak_allocated_bytes
    assert stats.reserved_bytes >= stats.allocated_bytes
