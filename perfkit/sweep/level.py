"""One level's raw data -> its typed LevelResult (perfkit.result): counts apart from timings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from perfkit.config.schema import SloConfig
from perfkit.config.units import cdiv
from perfkit.engine.blocks import PoolCounters
from perfkit.engine.engine import EngineStats, KvSample
from perfkit.measure.samplers import LevelMeasurements
from perfkit.records import RequestRecord
from perfkit.result.level import (
    GuardCounts,
    GuardSection,
    GuardTiming,
    KvSection,
    KvTimeline,
    LevelResult,
    LoadPoint,
    RequestSample,
)
from perfkit.summary.latency import goodput, level_counts, level_latency, throughput

MAX_TIMELINE_POINTS = 200
ENGINE_POOL = "engine block pool"


@dataclass
class LevelRun:
    """Everything measured in one in-process level, before analysis."""

    point: LoadPoint
    repeat: int
    records: list[RequestRecord]
    stats: EngineStats
    pool: PoolCounters
    num_blocks: int
    block_size: int
    measurements: LevelMeasurements


def strided(values: list[KvSample], limit: int = MAX_TIMELINE_POINTS) -> list[KvSample]:
    """At most `limit` evenly strided points (the first always kept)."""
    return values[::max(1, cdiv(len(values), limit))]


def _kv(run: LevelRun) -> KvSection:
    tl = run.stats.kv_timeline
    steps = max(len(tl), 1)
    points = strided(tl)
    t0 = tl[0].time_s if tl else 0.0
    peak = max((s.blocks_used for s in tl), default=0)
    mean = sum(s.blocks_used for s in tl) / steps  # per step
    return KvSection(
        available=True, source=ENGINE_POOL,
        blocks_total=run.num_blocks, slots_total=run.num_blocks * run.block_size,
        block_size=run.block_size, peak_blocks_used=peak,
        peak_slots_used=max((s.slots_used for s in tl), default=0),
        mean_blocks_used=mean, mean_slots_used=sum(s.slots_used for s in tl) / steps,
        usage_peak=peak / run.num_blocks if run.num_blocks else None,
        usage_mean=mean / run.num_blocks if run.num_blocks else None,
        peak_waiting=max((s.waiting for s in tl), default=0),
        peak_running=max((s.running for s in tl), default=0),
        mean_blocks_shared=sum(s.blocks_shared for s in tl) / steps,
        peak_blocks_shared=max((s.blocks_shared for s in tl), default=0),
        mean_blocks_saved=sum(s.blocks_saved for s in tl) / steps,
        peak_blocks_saved=max((s.blocks_saved for s in tl), default=0),
        timeline=KvTimeline(
            t_s=[round(s.time_s - t0, 6) for s in points],
            blocks_used=[s.blocks_used for s in points],
            slots_used=[s.slots_used for s in points],
            running=[s.running for s in points],
            waiting=[s.waiting for s in points]),
    )


def _guard(stats: EngineStats) -> GuardSection:
    counts = stats.guard
    return GuardSection(
        GuardCounts(dict(counts.ended), counts.tool_calls, counts.invalid_tool_calls),
        GuardTiming(stats.guard_s, stats.guard_s / stats.steps * 1e6 if stats.steps else 0.0))


def request_sample(r: RequestRecord, preemptions: bool = True,
                   error: str | None = None) -> RequestSample:
    """`preemptions=False`: the client cannot see them (a remote target)."""
    return RequestSample(
        id=r.request_id, warmup=r.warmup, arrival_s=r.arrival_s,
        prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens, outputs=r.num_outputs,
        cached_tokens=r.cached_tokens,
        preemptions=r.num_preemptions if preemptions else None,
        rejected=r.rejected, finish_reason=r.finish_reason,
        ttft_s=r.ttft_s, tpot_s=r.tpot_s, e2e_s=r.e2e_s, queue_s=r.queue_s,
        itl_s=[round(x, 7) for x in r.itl_s], error=error,
        trace_id=r.trace_id, response_id=r.response_id,
        arrival_unix_s=None if r.arrival_unix_ns is None else r.arrival_unix_ns / 1e9)


def measured_level(point: LoadPoint, repeat: int, recs: list[RequestRecord], slo: SloConfig,
                   m: LevelMeasurements, kv: KvSection,
                   percentiles: Sequence[float] = ()) -> LevelResult:
    """The sections any level has, wherever its requests were served: client-side
    counts, latency, throughput, goodput, and what the samplers saw of this process."""
    thr = throughput(recs)
    e2e_sum = sum(r.e2e_s or 0.0 for r in recs if not r.warmup)
    counts = level_counts(recs)
    prompt = counts.prompt_tokens
    nvml = m.nvml
    return LevelResult(
        concurrency=point.concurrency, rate=point.rate, repeat=repeat,
        counts=counts, latency=level_latency(recs, percentiles=percentiles), throughput=thr,
        goodput=goodput(recs, slo),
        observed_concurrency=e2e_sum / thr.window_s if thr.window_s else None,
        prefix_hit_rate=counts.cached_tokens / prompt if prompt else None,
        kv=kv, cpu=m.proc, gc=m.gc,
        gpu=replace(nvml, samples=nvml.samples[:MAX_TIMELINE_POINTS]), cuda=m.cuda,
        system=m.system,
    )


def level_result(run: LevelRun, slo: SloConfig, percentiles: Sequence[float] = ()
                 ) -> LevelResult:
    level = measured_level(run.point, run.repeat, run.records, slo, run.measurements, _kv(run),
                           percentiles)
    counts = replace(
        level.counts, steps=run.stats.steps, batched_tokens=run.stats.batched_tokens,
        pool_allocations=run.pool.allocations, pool_frees=run.pool.frees,
        pool_hits=run.pool.hits, pool_misses=run.pool.misses,
        pool_evictions=run.pool.evictions, pool_copy_on_writes=run.pool.copy_on_writes)
    return replace(level, counts=counts, guard=_guard(run.stats),
                   requests=[request_sample(r) for r in run.records])
