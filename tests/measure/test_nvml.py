import json
import os
import sys
import threading
import time
from dataclasses import asdict
from types import SimpleNamespace

import pytest
import torch

from perfkit.measure.nvml import NvmlSampler

GIB = 1024**3
MIB = 1024**2


class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """pynvml stand-in: memory grows 1 MiB per call; chosen calls raise."""

    NVMLError = FakeNvmlError

    def __init__(
        self, fail_mem_calls=(), fail_util_calls=(), our_bytes=(512 * MIB,), init_error=None
    ):
        self.fail_mem_calls = set(fail_mem_calls)  # 1-based call numbers that raise
        self.fail_util_calls = set(fail_util_calls)
        self.our_bytes = list(our_bytes)  # per process query, cycled; None = not reported
        self.init_error = init_error
        self.num_mem_calls = 0
        self.num_util_calls = 0
        self.num_process_calls = 0
        self.returned_used: list[int] = []  # used bytes handed out by successful memory calls
        self.returned_util: list[int] = []
        self.returned_ours: list[int | None] = []
        self.num_inits = self.num_shutdowns = 0
        self.handle = object()

    def nvmlInit(self):
        if self.init_error is not None:
            raise self.init_error
        self.num_inits += 1

    def nvmlShutdown(self):
        self.num_shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index):
        if index != 0:
            raise FakeNvmlError("Invalid Argument")
        return self.handle

    def nvmlDeviceGetName(self, handle):
        return b"Fake GPU 80GB"

    def nvmlDeviceGetMemoryInfo(self, handle):
        assert handle is self.handle
        self.num_mem_calls += 1
        if self.num_mem_calls in self.fail_mem_calls:
            raise FakeNvmlError("GPU is lost")
        used = GIB + self.num_mem_calls * MIB
        if self.num_mem_calls > 1:  # the first call is start()'s total-memory read
            self.returned_used.append(used)
        return SimpleNamespace(total=80 * GIB, used=used, free=80 * GIB - used)

    def nvmlDeviceGetUtilizationRates(self, handle):
        self.num_util_calls += 1
        if self.num_util_calls in self.fail_util_calls:
            raise RuntimeError("util broke")
        util = (self.num_util_calls * 7) % 101
        self.returned_util.append(util)
        return SimpleNamespace(gpu=util, memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        ours = self.our_bytes[self.num_process_calls % len(self.our_bytes)]
        self.num_process_calls += 1
        self.returned_ours.append(ours)
        return [
            SimpleNamespace(pid=os.getpid() + 1, usedGpuMemory=9 * GIB),
            SimpleNamespace(pid=os.getpid(), usedGpuMemory=ours),
        ]


def run_sampler(fake, seconds, hz=20.0, **kw):
    s = NvmlSampler(hz=hz, nvml=fake, **kw)
    s.start()
    time.sleep(seconds)
    return s.stop()


def nvml_threads():
    return [t for t in threading.enumerate() if t.name == "perfkit-nvml"]


def test_samples_at_roughly_the_rate_with_exact_aggregates():
    fake = FakeNvml()
    stats = run_sampler(fake, 0.5)
    assert stats.available and stats.device_name == "Fake GPU 80GB"
    assert stats.memory_total_bytes == 80 * GIB
    assert 4 <= stats.num_samples <= 15
    assert stats.num_samples == len(stats.samples)
    used = [s.used_bytes for s in stats.samples]
    assert used == fake.returned_used
    assert stats.peak_used_bytes == max(used)
    assert stats.mean_used_bytes == round(sum(used) / len(used))
    assert stats.mean_util_pct == pytest.approx(sum(fake.returned_util) / len(fake.returned_util))
    ts = [s.t_s for s in stats.samples]
    assert ts[0] < 0.1 and ts == sorted(ts)
    assert stats.peak_process_bytes == 512 * MIB
    assert stats.num_errors == 0
    assert fake.num_shutdowns == fake.num_inits == 1
    assert 0 < stats.overhead_s < 0.05
    assert stats.thread_cpu_s < 0.02 * 0.5  # < 2% of one core over the level
    json.dumps(asdict(stats))


def test_errors_in_the_thread_are_counted_not_raised():
    fake = FakeNvml(fail_mem_calls={3}, fail_util_calls={4})
    stats = run_sampler(fake, 0.5)
    assert stats.available
    assert stats.num_errors == 2
    assert "nvmlDeviceGetUtilizationRates" in stats.last_error or "GPU is lost" in stats.last_error
    # The failed memory call left no sample; sampling went on after it.
    assert stats.num_samples == fake.num_mem_calls - 2  # minus start()'s read and the failure
    assert stats.num_samples >= 4
    assert [s.util_pct for s in stats.samples].count(None) == 1
    assert stats.peak_used_bytes == max(fake.returned_used)
    assert not nvml_threads()


def test_running_process_query_is_rate_limited():
    fake = FakeNvml()
    stats = run_sampler(fake, 0.5)  # 20 Hz samples, 1 s process interval
    assert fake.num_process_calls == stats.num_process_queries == 1
    assert sum(s.process_bytes is not None for s in stats.samples) == 1
    fast = FakeNvml()
    stats = run_sampler(fast, 0.35, process_interval_s=0.1)
    assert 2 <= fast.num_process_calls <= 5  # queries are >= 0.1 s apart
    assert fast.num_process_calls < stats.num_samples


def test_process_memory_none_and_peak_over_reported():
    fake = FakeNvml(our_bytes=(None, 300 * MIB, 700 * MIB))
    stats = run_sampler(fake, 0.25, process_interval_s=0.001)  # every sample queries
    assert fake.num_process_calls >= 3
    assert stats.peak_process_bytes == 700 * MIB
    none_only = run_sampler(FakeNvml(our_bytes=(None,)), 0.1)
    assert none_only.peak_process_bytes is None
    other_pid = run_sampler(FakeNvml(), 0.1, pid=1)
    assert other_pid.peak_process_bytes is None


def test_init_failure_is_unavailable_without_a_thread():
    fake = FakeNvml(init_error=FakeNvmlError("NVML Shared Library Not Found"))
    s = NvmlSampler(nvml=fake)
    s.start()
    assert not nvml_threads()
    stats = s.stop()
    assert not stats.available
    assert "NVML Shared Library Not Found" in stats.reason
    assert stats.num_samples == 0 and fake.num_mem_calls == 0


def test_bad_device_index_is_unavailable_and_shuts_down():
    fake = FakeNvml()
    s = NvmlSampler(device_index=3, nvml=fake)
    s.start()
    stats = s.stop()
    assert not stats.available and "device 3" in stats.reason
    assert fake.num_shutdowns == 1 and not nvml_threads()


def test_missing_pynvml_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise
    s = NvmlSampler()
    s.start()
    stats = s.stop()
    assert not stats.available and "pynvml" in stats.reason


@pytest.mark.parametrize("hz", [0, -1, 20.5, 100, float("nan"), float("inf")])
def test_bad_rates_rejected(hz):
    with pytest.raises(ValueError, match="Hz"):
        NvmlSampler(hz=hz)


def test_above_20_hz_message():
    with pytest.raises(ValueError, match="costs driver time; use <= 20"):
        NvmlSampler(hz=21)


def test_stop_twice_and_restart():
    fake = FakeNvml()
    s = NvmlSampler(hz=20, nvml=fake)
    assert not s.stop().available  # before start: no crash
    s.start()
    with pytest.raises(RuntimeError):
        s.start()
    time.sleep(0.12)
    first = s.stop()
    assert s.stop() is first
    s.start()
    time.sleep(0.12)
    second = s.stop()
    assert second is not first and second.num_samples >= 1
    assert fake.num_inits == fake.num_shutdowns == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_real_nvml_without_driver_says_why():
    s = NvmlSampler()
    s.start()
    stats = s.stop()
    assert not stats.available
    assert "NVML" in stats.reason or "pynvml" in stats.reason
    assert not nvml_threads()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_nvml_on_gpu():
    x = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    stats = run_sampler(None, 1.2, hz=10.0)
    del x
    assert stats.available, stats.reason
    assert stats.memory_total_bytes > 0 and stats.device_name
    assert stats.num_samples >= 5
    assert 0 < stats.peak_used_bytes <= stats.memory_total_bytes
    assert stats.num_process_queries <= 2
