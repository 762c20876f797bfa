"""One level's raw data -> its result dict: counts apart from timings.

Layout of a level (JSON):
  concurrency | rate, repeat
  counts      ints, deterministic for profile + seed (tokens, blocks, preemptions, hits)
  latency     ttft / tpot / itl / e2e / queue distributions (seconds)
  throughput  requests/s, tokens/s; goodput; observed concurrency
  kv          usage in blocks and token slots: peaks and per-step means (counts), timeline
  guard       counts: requests ended by reason (stop = tool call accepted, loop, length),
              tool_calls, invalid_tool_calls (must be 0 with the guard on); timing apart
  cpu, gc, gpu, cuda   sampler results (timings; with their own int counters)
  requests    raw per-request samples
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from perfkit.config.schema import SloConfig
from perfkit.engine.blocks import PoolCounters
from perfkit.engine.engine import EngineStats, KvSample
from perfkit.measure.samplers import LevelMeasurements
from perfkit.records import RequestRecord
from perfkit.summary.latency import goodput, level_counts, level_latency, throughput

MAX_TIMELINE_POINTS = 200


@dataclass
class LevelRun:
    """Everything measured in one level, before analysis."""

    concurrency: int | None
    rate: float | None
    repeat: int
    records: list[RequestRecord]
    stats: EngineStats
    pool: PoolCounters
    num_blocks: int
    block_size: int
    measurements: LevelMeasurements


def _kv(run: LevelRun) -> dict[str, Any]:
    tl = run.stats.kv_timeline
    steps = max(len(tl), 1)
    stride = max(1, -(-len(tl) // MAX_TIMELINE_POINTS))
    points: list[KvSample] = tl[::stride]
    t0 = tl[0].time_s if tl else 0.0
    return {
        "blocks_total": run.num_blocks,
        "slots_total": run.num_blocks * run.block_size,
        "block_size": run.block_size,
        "peak_blocks_used": max((s.blocks_used for s in tl), default=0),
        "peak_slots_used": max((s.slots_used for s in tl), default=0),
        "mean_blocks_used": sum(s.blocks_used for s in tl) / steps,  # per step
        "mean_slots_used": sum(s.slots_used for s in tl) / steps,
        "peak_waiting": max((s.waiting for s in tl), default=0),
        "timeline": {
            "t_s": [round(s.time_s - t0, 6) for s in points],
            "blocks_used": [s.blocks_used for s in points],
            "slots_used": [s.slots_used for s in points],
            "running": [s.running for s in points],
            "waiting": [s.waiting for s in points],
        },
    }


def _guard(stats: EngineStats) -> dict[str, Any]:
    counts = stats.guard
    return {
        "counts": {"ended": dict(counts.ended), "tool_calls": counts.tool_calls,
                   "invalid_tool_calls": counts.invalid_tool_calls},
        "timing": {"guard_s": stats.guard_s,
                   "us_per_step": stats.guard_s / stats.steps * 1e6 if stats.steps else 0.0},
    }


def request_sample(r: RequestRecord) -> dict[str, Any]:
    return {
        "id": r.request_id, "warmup": r.warmup, "arrival_s": r.arrival_s,
        "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens,
        "cached_tokens": r.cached_tokens, "preemptions": r.num_preemptions,
        "rejected": r.rejected, "finish_reason": r.finish_reason,
        "ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "e2e_s": r.e2e_s, "queue_s": r.queue_s,
        "itl_s": [round(x, 7) for x in r.itl_s],
    }


def measured_sections(recs: list[RequestRecord], slo: SloConfig,
                      m: LevelMeasurements) -> dict[str, Any]:
    """The sections any level has, wherever its requests were served: client-side
    counts, latency, throughput, goodput, and what the samplers saw of this process."""
    thr = throughput(recs)
    e2e_sum = sum(r.e2e_s or 0.0 for r in recs if not r.warmup)
    lat = level_latency(recs)
    return {
        "counts": dataclasses.asdict(level_counts(recs)),
        "latency": {k: getattr(lat, k).to_dict() for k in ("ttft", "tpot", "itl", "e2e", "queue")},
        "throughput": dataclasses.asdict(thr),
        "goodput": dataclasses.asdict(goodput(recs, slo)),
        "observed_concurrency": e2e_sum / thr.window_s if thr.window_s else None,
        "cpu": dataclasses.asdict(m.proc),
        "gc": {k: v for k, v in dataclasses.asdict(m.gc).items() if k != "pauses_s"},
        "gpu": {k: v for k, v in dataclasses.asdict(m.nvml).items() if k != "samples"}
        | {"timeline": [dataclasses.asdict(s) for s in m.nvml.samples[:MAX_TIMELINE_POINTS]]},
        "cuda": dataclasses.asdict(m.cuda),
    }


def level_result(run: LevelRun, slo: SloConfig) -> dict[str, Any]:
    recs = run.records
    sec = measured_sections(recs, slo, run.measurements)
    counts = sec["counts"]
    prompt = counts["prompt_tokens"]
    return {
        "concurrency": run.concurrency,
        "rate": run.rate,
        "repeat": run.repeat,
        "counts": {
            **counts,
            "steps": run.stats.steps,
            "batched_tokens": run.stats.batched_tokens,
            **{f"pool_{k}": v for k, v in dataclasses.asdict(run.pool).items()},
        },
        **{k: sec[k] for k in ("latency", "throughput", "goodput", "observed_concurrency")},
        "prefix_hit_rate": counts["cached_tokens"] / prompt if prompt else 0.0,
        "kv": _kv(run),
        "guard": _guard(run.stats),
        **{k: sec[k] for k in ("cpu", "gc", "gpu", "cuda")},
        "requests": [request_sample(r) for r in recs],
    }
