"""Typed levels for tests: a blank LevelResult, with a partial dict merged in
(as JSON: the same paths a result file has)."""

from __future__ import annotations

from typing import Any

from perfkit.measure.cuda_mem import CudaMemStats
from perfkit.measure.gc import GcStats
from perfkit.measure.nvml import NvmlStats
from perfkit.measure.proc import ProcStats
from perfkit.result.codec import from_json, to_json
from perfkit.result.level import (
    Counts,
    Distribution,
    Goodput,
    KvSection,
    Latency,
    LevelResult,
    Throughput,
)


def blank() -> dict[str, Any]:
    empty = Distribution(0)
    level = LevelResult(
        concurrency=4, rate=None, repeat=0,
        counts=Counts(requests=0, completed=0, rejected={}, finish_reasons={}, preemptions=0,
                      prompt_tokens=0, output_tokens=0, cached_tokens=0, warmup_excluded=0),
        latency=Latency(empty, empty, empty, empty, empty),
        throughput=Throughput(None, None, None, None), goodput=Goodput(0, 0, None, None, None),
        observed_concurrency=None, prefix_hit_rate=None,
        kv=KvSection(available=True, source="engine block pool"),
        cpu=ProcStats.wall_only(1.0, "test"), gc=GcStats.disabled("test"),
        gpu=NvmlStats.unavailable("test"), cuda=CudaMemStats.unavailable("test"))
    return to_json(level)


def merge(base: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def level(part: dict[str, Any]) -> LevelResult:
    return from_json(LevelResult, merge(blank(), part), "level")
