"""Waste accounting over the real engine: the Scheduler with a null forward, or the Engine.

`replay_scheduler` drives `engine.scheduler.Scheduler` and `engine.blocks.BlockPool`
exactly as `Engine.step()` does (schedule -> commit -> append one token to each
sampling request -> finish at max_tokens or max_model_len) with no tensors: the
sampled token is a fixed id. It is the reference the fast paged replay is tested
against, and the engine's scheduling does not depend on token values except
through prefix hashes of generated tokens, which no other request shares.

`account` reads one step's pool state, the same way for both:
    allocated = used blocks x block_size (shared blocks once)
    used      = allocated - the unfilled tails of running requests' block tables
    internal  = per running request, table slots beyond its kv_len
                (min(prompt + max_tokens, max_model_len) - 1)
    reserved  = allocated - used - internal;  free = free blocks x block_size
    external  = 0 (any free block serves any request)
The waiting queue is not capped (max_waiting is raised to the number of requests):
the replay measures memory, not the front door's queue limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from perfkit.config.profile import pool_blocks
from perfkit.config.schema import Profile
from perfkit.engine.blocks import BlockPool, PoolCounters
from perfkit.engine.scheduler import Scheduler, SchedulerConfig
from perfkit.engine.sequence import Sequence
from perfkit.fragmentation.types import PolicyResult, Slots
from perfkit.workload import RequestSpec

NULL_TOKEN = 1  # what the null forward "samples"
UNLIMITED = 1 << 40  # a token budget no step reaches


def account(pool: BlockPool, running: list[Sequence], max_model_len: int) -> Slots:
    """One step's pool by waste kind (see module doc)."""
    bs = pool.block_size
    tails = internal = 0
    for seq in running:
        table = len(seq.block_ids) * bs
        tails += table - seq.num_computed_tokens
        kv_len = min(seq.num_prompt_tokens + seq.max_tokens, max_model_len) - 1
        internal += max(0, table - kv_len)
    allocated = pool.num_used_blocks * bs
    used = allocated - tails
    return Slots(used, allocated - used - internal, internal, 0, pool.num_free_blocks * bs)


@dataclass
class Recorder:
    """Accumulates accounted steps into a PolicyResult (the live and exact replays)."""

    name: str
    block_size: int
    num_blocks: int
    max_model_len: int
    steps: int = 0
    sums: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])
    peak: Slots = field(default_factory=lambda: Slots(0, 0, 0, 0, 0))
    peak_step: int = -1
    peak_sequences: int = 0
    timeline: list[tuple[int, int]] = field(default_factory=list)  # (blocks, slots used)
    cached_free: list[int] = field(default_factory=list)  # cached-but-free blocks per step

    def record(self, t: int, pool: BlockPool, running: list[Sequence], num_ran: int) -> None:
        slots = account(pool, running, self.max_model_len)
        for k, value in enumerate((slots.used, slots.reserved, slots.internal, 0, slots.free)):
            self.sums[k] += value
        if slots.occupied > self.peak.occupied or self.peak_step < 0:
            self.peak, self.peak_step = slots, t
        self.peak_sequences = max(self.peak_sequences, num_ran)
        self.timeline.append((pool.num_used_blocks, slots.used))
        self.cached_free.append(pool.num_cached_free_blocks)
        self.steps += 1

    def result(self, finished: int, rejected: int, preempted: int) -> PolicyResult:
        return PolicyResult(
            name=self.name, kind="paged", block_size=self.block_size,
            pool_slots=self.num_blocks * self.block_size, num_blocks=self.num_blocks,
            num_steps=self.steps, totals=Slots(*self.sums), peak=self.peak,
            peak_step=self.peak_step, free_gap_sum=0.0, free_gap_peak=0.0,
            saved_block_steps=0, peak_saved_blocks=0, peak_sequences=self.peak_sequences,
            num_finished=finished, num_rejected=rejected, num_preempted=preempted,
            num_queued_for_memory=0, num_queued_for_seqs=0, timeline=self.timeline,
        )


@dataclass
class ExactReplay:
    result: PolicyResult
    counters: PoolCounters
    cached_free: list[int]  # cached-but-free blocks after each recorded step


def _sequence(spec: RequestSpec) -> Sequence:
    return Sequence(seq_id=spec.request_id, token_ids=list(spec.prompt),
                    num_prompt_tokens=len(spec.prompt), max_tokens=spec.max_tokens,
                    priority=spec.priority, tool_call=spec.tool_call)


def drive_arrivals(arrival_steps: list[int], add: Callable[[int], bool],
                   has_work: Callable[[], bool], step: Callable[[int, bool], None]) -> int:
    """Submit request i at step arrival_steps[i] (add(i) says whether it was rejected), call
    step(t, more_arrivals) at every step with work, jump over idle gaps. Returns the number
    of rejections. Shared by the scheduler replay and the live engine run, so both see the
    same step clock."""
    rejected = nxt = 0
    num = len(arrival_steps)
    t = arrival_steps[0] if num else 0
    while nxt < num or has_work():
        while nxt < num and arrival_steps[nxt] <= t:
            rejected += add(nxt)
            nxt += 1
        if not has_work():
            if nxt >= num:
                break
            t = arrival_steps[nxt]
            continue
        step(t, nxt < num)
        t += 1
    return rejected


def replay_scheduler(
    profile: Profile, specs: list[RequestSpec], arrival_steps: list[int],
    unlimited_budget: bool = False, name: str | None = None,
) -> ExactReplay:
    """Step the real Scheduler over `specs` (arriving at `arrival_steps`), no tensors."""
    eng = profile.engine
    pool = BlockPool(pool_blocks(profile), eng.block_size, eng.prefix_caching)
    budget = UNLIMITED if unlimited_budget else eng.max_num_batched_tokens
    sched = Scheduler(SchedulerConfig(eng.max_num_seqs, budget, eng.max_model_len,
                                      max(len(specs), 1)), pool)
    rec = Recorder(name or f"paged-{eng.block_size} (scheduler)", eng.block_size,
                   pool.num_blocks, eng.max_model_len)
    finished = 0

    def step(t: int, more_arrivals: bool) -> None:
        nonlocal finished
        out = sched.schedule()
        if out.scheduled:
            sched.commit(out)
            for item in out.scheduled:
                if item.samples:
                    finished += _append(sched, item.seq, eng.max_model_len)
            rec.record(t, pool, sched.running, len(out.scheduled))
        elif not more_arrivals and not out.preempted:
            raise RuntimeError("scheduler made no progress")  # an engine bug, not user input

    rejected = drive_arrivals(
        arrival_steps, lambda i: sched.add(_sequence(specs[i])) is not None,
        lambda: sched.has_work, step,
    )
    return ExactReplay(rec.result(finished, rejected, sched.num_preemptions),
                       dataclasses.replace(pool.counters), rec.cached_free)


def _append(sched: Scheduler, seq: Sequence, max_model_len: int) -> bool:
    seq.token_ids.append(NULL_TOKEN)
    if seq.num_output_tokens >= seq.max_tokens or seq.num_tokens >= max_model_len:
        sched.finish(seq, "length")
        return True
    return False
