import gc
import json
import threading
import time
from dataclasses import asdict

import pytest
import torch
from test_nvml import FakeNvml

from perfkit.measure.samplers import DISABLED, LevelSamplers


def busy(seconds: float) -> None:
    """At least `seconds` of wall time and of this process's CPU time: on a machine
    shared with other jobs, wall time alone may hold little CPU."""
    end, cpu_end = time.perf_counter() + seconds, time.process_time() + seconds / 2
    while time.perf_counter() < end or time.process_time() < cpu_end:
        sum(range(100))


def nvml_threads():
    return [t for t in threading.enumerate() if t.name == "perfkit-nvml"]


def test_enabled_level_measures_everything_and_is_json():
    fake = FakeNvml()
    s = LevelSamplers(nvml_hz=20, nvml=fake)
    s.start()
    busy(0.3)
    gc.collect(0)
    m = s.stop()
    assert m.enabled
    assert m.proc.available and m.proc.user_s > 0.1 and m.proc.wall_s >= 0.3
    assert m.gc.available and m.gc.count >= 1
    assert m.nvml.available and m.nvml.num_samples >= 3
    if not torch.cuda.is_available():
        assert not m.cuda.available and "is_available" in m.cuda.reason
    assert not nvml_threads()
    assert s._gc._on_gc not in gc.callbacks
    json.dumps(asdict(m))


def test_disabled_level_measures_wall_time_only():
    fake = FakeNvml()
    before = list(gc.callbacks)
    s = LevelSamplers(nvml_hz=20, enabled=False, nvml=fake)
    s.start()
    assert gc.callbacks == before and not nvml_threads()
    time.sleep(0.05)
    gc.collect(0)
    m = s.stop()
    assert not m.enabled
    assert 0.05 <= m.proc.wall_s < 2
    assert not m.proc.available and m.proc.reason == DISABLED
    assert m.proc.user_s == 0.0 and m.proc.num_minor_faults == 0
    assert not m.gc.available and m.gc.count == 0
    assert not m.nvml.available and m.nvml.reason == DISABLED
    assert not m.cuda.available and m.cuda.reason == DISABLED
    assert fake.num_inits == 0 and fake.num_mem_calls == 0
    json.dumps(asdict(m))


def test_nvml_hz_zero_turns_only_nvml_off():
    fake = FakeNvml()
    s = LevelSamplers(nvml_hz=0, nvml=fake)
    s.start()
    m = s.stop()
    assert m.proc.available and m.gc.available
    assert not m.nvml.available and "nvml_hz=0" in m.nvml.reason
    assert fake.num_inits == 0


def test_bad_nvml_rate_rejected_up_front():
    with pytest.raises(ValueError, match="use <= 20"):
        LevelSamplers(nvml_hz=50)


def test_reusable_across_levels():
    fake = FakeNvml()
    s = LevelSamplers(nvml_hz=20, nvml=fake)
    results = []
    for _ in range(2):
        s.start()
        busy(0.1)
        results.append(s.stop())
    assert all(m.proc.available and m.nvml.available for m in results)
    assert fake.num_inits == fake.num_shutdowns == 2
    assert results[1].proc.wall_s < 1  # the second window did not include the first


def test_start_stop_cost_is_small():
    s = LevelSamplers(nvml_hz=20, nvml=FakeNvml())
    t = time.perf_counter()
    s.start()
    m = s.stop()
    cost_s = time.perf_counter() - t
    assert m.proc.available
    assert cost_s < 0.1  # a level lasts seconds: well under 2%
