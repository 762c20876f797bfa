"""Each finding fires on levels crafted for it and stays silent on a clean level."""

from __future__ import annotations

import copy

import pytest
from levels import level as typed_level

from perfkit.config.profile import Overrides, load_profile
from perfkit.result.sweep import Knee
from perfkit.summary.findings import find_all


def clean_level():
    return {
        "concurrency": 4, "rate": None, "repeat": 0,
        "counts": {"preemptions": 0, "steps": 1000},
        "latency": {"tpot": {"p99": 0.02}, "ttft": {"p99": 0.1}},
        "kv": {"peak_blocks_used": 100, "blocks_total": 512, "peak_waiting": 0,
               "usage_peak": 100 / 512,
               "mean_blocks_used": 50.0, "mean_slots_used": 760.0, "block_size": 16},
        "cpu": {"available": True, "user_s": 2.0, "system_s": 0.05, "system_share": 0.024,
                "num_minor_faults": 2000, "wall_s": 2.5, "run_queue_wait_s": 0.1,
                "num_involuntary_ctx_switches": 50},
        "gc": {"available": True, "max_s": 0.001, "count": 3},
        "gpu": {"available": False, "memory_total_bytes": 0, "peak_used_bytes": 0},
    }


def ids(levels, profile_name="default", sets=(), knee=None):
    prof = load_profile(profile_name, Overrides(sets=tuple(sets)))
    return [f.id for f in find_all([typed_level(lv) for lv in levels], prof, knee)]


def test_clean_level_has_no_findings():
    assert ids([clean_level()]) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("counts", "preemptions"), 3, "kv_pressure"),
        (("cpu", "system_share"), 0.3, "high_kernel_time"),
        (("cpu", "num_minor_faults"), 200_000, "high_kernel_time"),
        (("cpu", "run_queue_wait_s"), 1.5, "cpu_contention"),
        (("gc", "max_s"), 0.05, "gc_pauses"),
        (("kv", "mean_slots_used"), 300.0, "internal_fragmentation"),
    ],
)
def test_each_rule_fires(path, value, expected):
    level = copy.deepcopy(clean_level())
    level[path[0]][path[1]] = value
    assert expected in ids([level])


def test_gpu_near_limit():
    level = clean_level()
    level["gpu"] = {"available": True, "memory_total_bytes": 100, "peak_used_bytes": 99}
    assert "gpu_memory_near_limit" in ids([level])


def test_prefix_caching_missed():
    assert "prefix_caching_missed" in ids([clean_level()], "shared-prefix",
                                          ["engine.prefix_caching=false"])
    assert "prefix_caching_missed" in ids([clean_level()], "shared-prefix",
                                          ["workload.shared_prefix.length=8"])
    assert ids([clean_level()], "shared-prefix") == []


def test_saturation_from_knee():
    knee = Knee(8, "throughput-plateau", "Throughput stops growing at concurrency 8.", [])
    found = ids([clean_level()], knee=knee)
    assert found == ["saturation"]
