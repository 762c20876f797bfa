"""Microbenchmark: steady-state decode steps of a profile's engine, counted by the OS.

The batch is filled with max_num_seqs long-output requests; after the prefills
and a warm-up, `steps` decode steps are measured with getrusage deltas. The same
steps with the null executor (the engine's loop without the model) give
`null_ms_per_step`: the bookkeeping's share of a step.
"""

from __future__ import annotations

import time

from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.measure.proc import delta, snapshot
from perfkit.workload import RequestSpec


def _fill(engine: Engine, profile: Profile, out_len: int) -> None:
    """max_num_seqs requests, stepped until every prompt is computed."""
    eng, vocab = profile.engine, profile.model.vocab_size - 1
    prompt_len = max(8, min(64, eng.max_model_len - out_len - 1))
    for i in range(eng.max_num_seqs):
        prompt = tuple((i * 131 + j) % vocab + 1 for j in range(prompt_len))
        engine.add_request(RequestSpec(i, prompt, out_len))
    while any(s.num_computed_tokens < s.num_prompt_tokens for s in engine.scheduler.running) \
            or engine.scheduler.waiting:
        engine.step()


def _null_ms_per_step(profile: Profile, steps: int, warmup: int) -> float:
    engine = Engine(profile, executor=null_executor())
    engine.record_timeline = False
    _fill(engine, profile, steps + warmup + 8)
    for _ in range(warmup):
        engine.step()
    start = time.perf_counter()
    for _ in range(steps):
        engine.step()
    return (time.perf_counter() - start) / steps * 1e3


def bench_step(profile: Profile, steps: int = 200, warmup: int = 20) -> dict[str, float]:
    engine = Engine(profile)
    engine.record_timeline = False
    _fill(engine, profile, steps + warmup + 8)
    for _ in range(warmup):
        engine.step()
    engine.reset_stats()  # the timed components below count the measured steps only
    before, start = snapshot(), time.perf_counter()
    for _ in range(steps):
        engine.step()
    d, elapsed = delta(before, snapshot()), time.perf_counter() - start
    cpu = d.user_s + d.system_s
    return {
        "minor_faults_per_step": d.num_minor_faults / steps,
        "major_faults_per_step": d.num_major_faults / steps,
        "system_share": d.system_s / cpu if cpu else 0.0,
        "ms_per_step": elapsed / steps * 1e3,
        # the step's components the engine times itself (inside ms_per_step)
        "sampler_us_per_step": engine.stats.sampler_s / engine.stats.steps * 1e6,
        "mask_us_per_step": engine.stats.guard_s / engine.stats.steps * 1e6,
        "null_ms_per_step": _null_ms_per_step(profile, steps, warmup),
        "batch": engine.profile.engine.max_num_seqs,
        "steps": steps,
    }
