"""Microbenchmark: scheduler bookkeeping per running sequence per step (no model).

256 sequences decode together: each step is schedule -> commit -> append one
token (what the engine does around the forward pass); a finished sequence is
replaced by a new one so the batch stays full.
"""

from __future__ import annotations

import time

from perfkit.engine.blocks import BlockPool
from perfkit.engine.scheduler import Scheduler, SchedulerConfig
from perfkit.engine.sequence import Sequence

NUM_RUNNING = 256
PROMPT = 64
OUTPUT = 192
BLOCK_SIZE = 16


def _new(sched: Scheduler, sid: int) -> None:
    prompt = [(sid * 7919 + i) % 30000 + 1 for i in range(PROMPT)]
    sched.add(Sequence(sid, prompt, PROMPT, OUTPUT))


def _step(sched: Scheduler, next_id: list[int]) -> int:
    out = sched.schedule()
    sched.commit(out)
    for item in out.scheduled:
        if item.samples:
            seq = item.seq
            seq.token_ids.append(7)
            if seq.num_output_tokens >= seq.max_tokens:
                sched.finish(seq, "length")
                _new(sched, next_id[0])
                next_id[0] += 1
    return len(out.scheduled)


def bench_scheduler(steps: int = 400, warmup: int = 100) -> dict[str, float]:
    per_seq = (PROMPT + OUTPUT) // BLOCK_SIZE + 1
    cfg = SchedulerConfig(NUM_RUNNING, NUM_RUNNING * PROMPT, 4096, 10_000)
    sched = Scheduler(cfg, BlockPool(NUM_RUNNING * per_seq * 2, BLOCK_SIZE))
    next_id = [NUM_RUNNING]
    for i in range(NUM_RUNNING):
        _new(sched, i)
    for _ in range(warmup):  # past the prefills, into steady decode
        _step(sched, next_id)
    scheduled = 0
    start = time.perf_counter()
    for _ in range(steps):
        scheduled += _step(sched, next_id)
    elapsed = time.perf_counter() - start
    return {"us_per_seq_step": elapsed / scheduled * 1e6, "running": NUM_RUNNING,
            "steps": steps}
