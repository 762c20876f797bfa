"""Run one in-process level: reset the engine, drive the load with the samplers around
it, turn the raw data into a LevelResult."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from perfkit import clock
from perfkit.config.schema import Profile
from perfkit.engine.async_engine import AsyncEngine
from perfkit.engine.engine import Engine
from perfkit.measure.contention import ContentionProbe
from perfkit.measure.samplers import LevelSamplers
from perfkit.records import RequestRecord
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.stacks.probe import TailProbe
from perfkit.summary.contention import contention_section
from perfkit.summary.tail_breakdown import tail_section
from perfkit.sweep.level import LevelRun, level_result
from perfkit.sweep.loops import EngineServe, OnRecord, OnWarm, drive
from perfkit.sweep.plan import SweepPlan
from perfkit.workload import RequestSpec, generate, level_arrivals


def level_specs(profile: Profile, plan: SweepPlan, level: LoadPoint) -> list[RequestSpec]:
    """Warm-up requests first (ids < num_warmup), then the measured ones; open-loop
    levels get arrival offsets at the level's rate (poisson unless the profile bursts).
    Every level draws fresh token ids (seeded by the seed and the level's name: the same
    in every repeat, in-process and remote); the lengths are the same at every level."""
    num = plan.num_warmup + plan.specs_at(level)
    if profile.workload.dataset.path:
        from perfkit.datasets.slices import dataset_level_specs

        return dataset_level_specs(profile, plan.levels, level, num,
                                   plan.num_warmup + plan.requests_at(level))
    specs = generate(profile.workload, profile.model.vocab_size, profile.engine.max_model_len,
                     num_requests=num, salt=f":{level.label}")
    if level.rate is None:
        return specs
    arrival = profile.workload.arrival
    times = level_arrivals(arrival, level.rate, num, profile.workload.seed)
    return [replace(s, arrival_s=t) for s, t in zip(specs, times)]


async def _drive(engine: Engine, specs: list[RequestSpec], level: LoadPoint, plan: SweepPlan,
                 t0: float, on_record: OnRecord, on_warm: OnWarm) -> list[RequestRecord]:
    least = (plan.requests_at(level), plan.min_level_s)
    async with AsyncEngine(engine) as aeng:
        return await drive(EngineServe(aeng, t0), specs, level, plan.num_warmup, t0,
                           on_record, on_warm, least, plan.ramp)


def _noop(record: Any) -> None:
    pass


def run_level(engine: Engine, profile: Profile, plan: SweepPlan, level: LoadPoint,
              repeat: int, on_record: OnRecord = _noop) -> LevelResult:
    clock.level_starts()  # in lockstep: this level runs beside the peer's same level
    engine.reset()
    specs = level_specs(profile, plan, level)
    # GIL and lock waits (bpftrace or the fallback sampler), counters: started before the
    # level's clock, as attaching takes a second or two; this thread steps the engine
    contention = ContentionProbe() if plan.contention else None
    if contention is not None:
        contention.start()
    samplers = LevelSamplers(profile.sweep.nvml_hz, enabled=plan.samplers)
    samplers.start()
    probe = TailProbe()  # GC pauses, run-queue wait, faults with times: the tail breakdown
    probe.start()

    def on_warm() -> None:  # measure the measured phase only
        engine.reset_stats()
        samplers.stop()
        samplers.start()
        probe.stop()
        probe.start()
        if contention is not None:
            contention.mark()

    t0 = clock.now()
    records = asyncio.run(_drive(engine, specs, level, plan, t0, on_record, on_warm))
    measurements = samplers.stop()
    stats = engine.stats
    probed = probe.stop()
    raw = contention.stop() if contention is not None else None
    run = LevelRun(level, repeat, records, stats, engine.pool.counters,
                   engine.pool.num_blocks, engine.block_size, measurements)
    result = level_result(run, profile.slo, profile.sweep.percentiles)
    waits = None if raw is None else contention_section(
        raw, stats.step_start_s, stats.step_end_s, t0, result.counts.output_tokens,
        list(zip(probed.gc_start_s, probed.gc_end_s)))
    tail = tail_section(records, stats.step_start_s, stats.step_end_s, stats.step_prefill_seqs,
                        probed, t0, waits)
    return replace(result, tail=tail, contention=waits)
