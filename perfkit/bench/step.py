"""Microbenchmark: steady-state decode steps of a profile's engine, counted by the OS.

The batch is filled with max_num_seqs long-output requests; after the prefills
and a warm-up, `steps` decode steps are measured with getrusage deltas.
"""

from __future__ import annotations

import time

from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.measure.proc import delta, snapshot
from perfkit.workload import RequestSpec


def bench_step(profile: Profile, steps: int = 200, warmup: int = 20) -> dict[str, float]:
    eng = profile.engine
    engine = Engine(profile)
    engine.record_timeline = False
    num = eng.max_num_seqs
    out_len = steps + warmup + 8
    prompt_len = max(8, min(64, eng.max_model_len - out_len - 1))
    for i in range(num):
        vocab = profile.model.vocab_size - 1
        prompt = tuple((i * 131 + j) % vocab + 1 for j in range(prompt_len))
        engine.add_request(RequestSpec(i, prompt, out_len))
    while any(s.num_computed_tokens < s.num_prompt_tokens for s in engine.scheduler.running) \
            or engine.scheduler.waiting:
        engine.step()
    for _ in range(warmup):
        engine.step()
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
        "batch": num,
        "steps": steps,
    }
