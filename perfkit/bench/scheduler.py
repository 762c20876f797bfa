"""Microbenchmark: the engine's bookkeeping per running sequence per step (no model).

256 sequences decode together in the real Engine with the null executor: each step is
Engine.step() (schedule -> execute, a fixed token -> commit -> append -> finish), what the
engine does around the forward pass; a finished sequence is replaced by a new one so the
batch stays full.
"""

from __future__ import annotations

import dataclasses
import time

from perfkit.config.profile import load_profile
from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.workload import RequestSpec

NUM_RUNNING = 256
PROMPT = 64
OUTPUT = 192
BLOCK_SIZE = 16
TOKEN = 7  # what every step samples
VOCAB = 30001


def _profile() -> Profile:
    base = load_profile("default")
    per_seq = (PROMPT + OUTPUT) // BLOCK_SIZE + 1
    engine = dataclasses.replace(
        base.engine, block_size=BLOCK_SIZE, num_blocks=NUM_RUNNING * per_seq * 2,
        kv_memory=None, max_num_seqs=NUM_RUNNING, max_num_batched_tokens=NUM_RUNNING * PROMPT,
        max_model_len=4096, max_waiting=10_000, prefix_caching=True, guard=False)
    model = dataclasses.replace(base.model, vocab_size=VOCAB)
    return dataclasses.replace(base, engine=engine, model=model)


def _spec(sid: int) -> RequestSpec:
    return RequestSpec(sid, tuple((sid * 7919 + i) % (VOCAB - 1) + 1 for i in range(PROMPT)),
                       OUTPUT)


def _step(engine: Engine, next_id: list[int]) -> None:
    for event in engine.step():
        if event.finished:
            engine.add_request(_spec(next_id[0]))
            next_id[0] += 1


def bench_scheduler(steps: int = 400, warmup: int = 100) -> dict[str, float]:
    engine = Engine(_profile(), executor=null_executor(TOKEN))
    engine.record_timeline = False
    scheduled = [0]  # sequences scheduled, summed over steps
    engine.on_step = lambda out: scheduled.__setitem__(0, scheduled[0] + len(out.scheduled))
    next_id = [NUM_RUNNING]
    for i in range(NUM_RUNNING):
        engine.add_request(_spec(i))
    for _ in range(warmup):  # past the prefills, into steady decode
        _step(engine, next_id)
    scheduled[0] = 0
    start = time.perf_counter()
    for _ in range(steps):
        _step(engine, next_id)
    elapsed = time.perf_counter() - start
    return {"us_per_seq_step": elapsed / scheduled[0] * 1e6, "running": NUM_RUNNING,
            "steps": steps}
