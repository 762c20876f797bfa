"""Each finding fires on levels crafted for it and stays silent on a clean level;
timing findings are withheld on a contended machine, and say so."""

from __future__ import annotations

import copy

import pytest
from levels import level as typed_level

from perfkit.config.profile import Overrides, load_profile
from perfkit.result.sweep import Knee
from perfkit.summary.findings import find_all

QUIET = {"available": True, "reason": "", "wall_s": 2.5, "num_cpus": 2, "busy_s": 2.1,
         "own_s": 2.05, "others_s": 0.05, "steal_s": 0.0, "load_1m": 1.0}
HOG = QUIET | {"busy_s": 5.0, "others_s": 2.95}


def clean_level(c: int = 4):
    return {
        "concurrency": c, "rate": None, "repeat": 0,
        "counts": {"preemptions": 0, "steps": 1000, "batched_tokens": 30_000,
                   "requests": 64, "completed": 64, "prompt_tokens": 64 * 96},
        "latency": {"tpot": {"p50": 0.01, "p99": 0.02}, "ttft": {"p50": 0.005, "p99": 0.1,
                                                                  "mean": 0.01},
                    "queue": {"mean": 0.0005}},
        "throughput": {"window_s": 2.5, "output_tokens_per_s": 1000.0},
        "goodput": {"requests": 64, "good_requests": 64, "share": 1.0},
        "prefix_hit_rate": 0.0,
        "kv": {"peak_blocks_used": 100, "blocks_total": 512, "peak_waiting": 0,
               "usage_peak": 100 / 512, "peak_running": c,
               "mean_blocks_used": 50.0, "mean_slots_used": 760.0, "block_size": 16},
        "cpu": {"available": True, "user_s": 2.0, "system_s": 0.05, "system_share": 0.024,
                "num_minor_faults": 2000, "wall_s": 2.5, "run_queue_wait_s": 0.01,
                "num_involuntary_ctx_switches": 50},
        "gc": {"available": True, "max_s": 0.001, "max_cpu_s": 0.001, "count": 3},
        "gpu": {"available": False, "memory_total_bytes": 0, "peak_used_bytes": 0},
        "system": QUIET,
    }


def ids(levels, profile_name="default", sets=(), knee=None):
    return [f.id for f in findings(levels, profile_name, sets, knee)]


def findings(levels, profile_name="default", sets=(), knee=None):
    prof = load_profile(profile_name, Overrides(sets=tuple(sets)))
    return find_all([typed_level(lv) for lv in levels], prof, knee)


def test_clean_level_has_no_findings():
    assert ids([clean_level()]) == []
    assert ids([clean_level(1), clean_level(2), clean_level(4)]) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("counts", "preemptions"), 3, "kv_pressure"),
        (("cpu", "system_share"), 0.3, "high_kernel_time"),
        (("cpu", "num_minor_faults"), 200_000, "high_kernel_time"),
        (("cpu", "run_queue_wait_s"), 1.5, "cpu_oversubscribed"),
        (("gc", "max_cpu_s"), 0.05, "gc_pauses"),
        (("kv", "mean_slots_used"), 300.0, "internal_fragmentation"),
        (("latency", "queue"), {"mean": 0.009}, "queue_dominated_ttft"),
        (("goodput", "share"), 0.37, "goodput_falling"),
        (("latency", "ttft"), {"p50": 0.4, "mean": 0.4}, "high_ttft_low_load"),
        (("counts", "batched_tokens"), 250_000, "token_budget"),
    ],
)
def test_each_rule_fires(path, value, expected):
    level = copy.deepcopy(clean_level())
    level[path[0]][path[1]] = value
    found = findings([level])
    assert expected in [f.id for f in found]
    f = next(f for f in found if f.id == expected)
    assert f.evidence["level"] == "concurrency 4" and f.fix


def test_gc_wall_pause_alone_is_descheduling_not_gc():
    level = clean_level()
    level["gc"] |= {"max_s": 0.0085, "max_cpu_s": 0.0004}
    assert ids([level]) == []


def test_contended_machine_withholds_timing_findings_and_says_so():
    level = clean_level()
    level["gc"]["max_cpu_s"] = 0.05
    level["cpu"]["run_queue_wait_s"] = 1.5
    level["system"] = HOG
    found = findings([level])
    assert [f.id for f in found] == ["machine_contended"]
    assert found[0].severity == "info"
    assert "gc_pauses" in found[0].evidence["withheld"]
    assert "other processes kept 1.2 cores busy" in found[0].message


def test_counts_findings_still_fire_when_contended():
    level = clean_level()
    level["system"] = HOG
    level["cpu"]["run_queue_wait_s"] = 1.0
    level["counts"]["preemptions"] = 3
    assert ids([level]) == ["kv_pressure", "machine_contended"]


def test_too_little_data_is_not_judged():
    level = clean_level()
    level["gc"]["max_cpu_s"] = 0.05
    level["throughput"]["window_s"] = 0.2
    assert ids([level]) == []


def test_batch_cap_names_the_key_and_the_trend():
    levels = []
    for c, waiting in ((1, 0), (2, 1), (4, 3)):
        lv = clean_level(c)
        lv["kv"] |= {"peak_running": min(c, 1), "peak_waiting": waiting,
                     "timeline": {"t_s": [0, 1], "running": [1, 1], "waiting": [waiting] * 2,
                                  "blocks_used": [1, 1], "slots_used": [1, 1]}}
        levels.append(lv)
    f = next(f for f in findings(levels, sets=["engine.max_num_seqs=1"]) if f.id == "batch_cap")
    assert f.evidence["level"] == "concurrency 2"
    assert "c=1 0 -> c=2 1 -> c=4 3" in f.message
    assert "--set engine.max_num_seqs=" in f.fix


def test_guard_off_invalid_tool_calls():
    level = clean_level()
    level["guard"] = {"counts": {"ended": {}, "tool_calls": 23, "invalid_tool_calls": 23},
                      "timing": {"guard_s": 0.0, "us_per_step": 0.0}}
    f = findings([level], sets=["engine.guard=false"])
    assert [x.id for x in f] == ["invalid_tool_calls"]
    assert "--set engine.guard=true" in f[0].fix


def test_prefix_caching_judged_by_saving():
    level = clean_level()
    level["counts"]["prompt_tokens"] = 64 * 200
    off = ["engine.prefix_caching=false"]
    assert ids([level], "shared-prefix", off) == ["prefix_caching_off"]
    # a prefix shorter than a block: no advice to turn caching on, a block size instead
    level["counts"]["prompt_tokens"] = 64 * 20
    f = findings([level], "shared-prefix", ["workload.shared_prefix.length=8",
                                            "workload.shared_prefix.share=1.0"])
    assert [x.id for x in f] == ["prefix_below_block"]
    assert "engine.block_size=8" in f[0].fix
    # a 3% share saves nothing worth a warning
    level["counts"]["prompt_tokens"] = 64 * 200
    assert ids([level], "shared-prefix", [*off, "workload.shared_prefix.share=0.03"]) == []


def test_prefix_cache_hits_measured():
    level = clean_level()
    level["counts"]["prompt_tokens"] = 64 * 200
    level["prefix_hit_rate"] = 0.0
    assert ids([level], "shared-prefix") == ["prefix_cache_misses"]
    level["prefix_hit_rate"] = 0.5
    assert ids([level], "shared-prefix") == []


def test_remote_fix_names_server_flags():
    level = clean_level()
    level["counts"]["preemptions"] = 3
    level["client"] = {"cpu_share": 0.1, "cpu_s": 0.1, "cpu_per_request_s": 0.001,
                       "wall_s": 2.5, "requests": 64, "connections": 4, "lag_interval_s": 0.01,
                       "loop_lag": {"p99": 0.001}}
    f = findings([level])
    kv = next(x for x in f if x.id == "kv_pressure")
    assert "--gpu-memory-utilization" in kv.fix and "--max-num-seqs" in kv.fix


def test_saturation_from_knee():
    knee = Knee(8, "throughput-plateau", "Throughput stops growing at concurrency 8.", [])
    found = ids([clean_level()], knee=knee)
    assert found == ["saturation"]
