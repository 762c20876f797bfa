"""Waste accounting over the real engine: with the null executor, or with the model.

`replay_scheduler` steps the reference replay (replay/engine_replay.py: the real Engine
with the null executor, requests arriving by the arrival rule) and accounts its pool
after every step that ran a request; `record_engine` is that accounting around the step
loop it shares with the live run (fragmentation/live.py), so both see the same step
clock. The fast paged replay is tested against it.

`account` reads one step's pool state, the same way for both:
    allocated = used blocks x block_size (shared blocks once)
    used      = allocated - the unfilled tails of running requests' block tables
                (a last block shared by several outputs once)
    internal  = per running request, table slots beyond its kv_len
                (min(prompt + max_tokens, max_model_len) - 1), a shared last block once
    reserved  = allocated - used - internal;  free = free blocks x block_size
    external  = 0 (any free block serves any request)
    saved     = the tables' entries - used blocks: what sharing saves (prefix hits,
                a request's outputs sharing their prompt and, beams, their past)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from perfkit.config.schema import Profile
from perfkit.engine.blocks import BlockPool, PoolCounters
from perfkit.engine.engine import Engine
from perfkit.engine.executor import TOP1_MEAN
from perfkit.engine.kv_manager import table_tails
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence
from perfkit.fragmentation.types import PolicyResult, Slots
from perfkit.replay.arrivals import ArrivalRule, ClosedLoop, open_loop
from perfkit.replay.engine_replay import null_engine, run_engine
from perfkit.workload import RequestSpec


def account(pool: BlockPool, running: list[Sequence], max_model_len: int) -> Slots:
    """One step's pool by waste kind (see module doc)."""
    bs = pool.block_size
    tails, _ = table_tails(running, bs)
    internal = 0
    last_blocks: set[int] = set()
    for seq in running:
        table = seq.block_ids
        if not table or table[-1] in last_blocks:
            continue
        last_blocks.add(table[-1])
        kv_len = min(seq.num_prompt_tokens + seq.max_tokens, max_model_len) - 1
        internal += max(0, len(table) * bs - kv_len)
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
    saved: list[int] = field(default_factory=lambda: [0, 0])  # block-steps saved; peak
    shared: list[int] = field(default_factory=lambda: [0, 0])  # shared block-steps; peak

    def record(self, t: int, pool: BlockPool, running: list[Sequence], num_ran: int) -> None:
        slots = account(pool, running, self.max_model_len)
        for k, value in enumerate((slots.used, slots.reserved, slots.internal, 0, slots.free)):
            self.sums[k] += value
        if slots.occupied > self.peak.occupied or self.peak_step < 0:
            self.peak, self.peak_step = slots, t
        self.peak_sequences = max(self.peak_sequences, num_ran)
        self.timeline.append((pool.num_used_blocks, slots.used))
        self.cached_free.append(pool.num_cached_free_blocks)
        saved = sum(len(s.block_ids) for s in running) - pool.num_used_blocks
        self.saved[0] += saved
        self.saved[1] = max(self.saved[1], saved)
        self.shared[0] += pool.num_shared_blocks
        self.shared[1] = max(self.shared[1], pool.num_shared_blocks)
        self.steps += 1

    def result(self, finished: int, rejected: int, preempted: int,
               copy_on_writes: int | None = None) -> PolicyResult:
        return PolicyResult(
            name=self.name, kind="paged", block_size=self.block_size,
            pool_slots=self.num_blocks * self.block_size, num_blocks=self.num_blocks,
            num_steps=self.steps, totals=Slots(*self.sums), peak=self.peak,
            peak_step=self.peak_step, free_gap_sum=0.0, free_gap_peak=0.0,
            saved_block_steps=self.saved[0], peak_saved_blocks=self.saved[1],
            peak_sequences=self.peak_sequences, num_finished=finished,
            num_rejected=rejected, num_preempted=preempted, num_queued_for_memory=0,
            num_queued_for_seqs=0, timeline=self.timeline, shared_block_steps=self.shared[0],
            peak_shared_blocks=self.shared[1], copy_on_writes=copy_on_writes,
        )


@dataclass
class ExactReplay:
    result: PolicyResult
    counters: PoolCounters
    cached_free: list[int]  # cached-but-free blocks after each recorded step


def record_engine(engine: Engine, specs: list[RequestSpec], rule: ArrivalRule,
                  rec: Recorder, after_step: Callable[[], None] | None = None
                  ) -> tuple[int, int]:
    """Run the engine over specs by the arrival rule (`engine_replay.run_engine`) and
    record its pool after every step that ran a request (then call after_step). Returns
    (finished, rejected)."""

    def step(t: int, out: SchedulerOutput, done: list[int]) -> None:
        if out.scheduled:
            rec.record(t, engine.pool, engine.scheduler.running, len(out.scheduled))
            if after_step is not None:
                after_step()

    return run_engine(engine, specs, rule, step)


def replay_scheduler(
    profile: Profile, specs: list[RequestSpec], arrival_steps: list[int],
    unlimited_budget: bool = False, name: str | None = None, clients: int = 0,
    client_delay: int = 0, top1_mean: float = TOP1_MEAN,
) -> ExactReplay:
    """`replay_engine` over `specs` arriving at `arrival_steps`, or sent by `clients`
    clients `client_delay` steps after each answer."""
    rule = ClosedLoop(clients, client_delay) if clients else open_loop(arrival_steps)
    return replay_engine(profile, specs, rule, unlimited_budget, name, top1_mean)


def replay_engine(profile: Profile, specs: list[RequestSpec], rule: ArrivalRule,
                  unlimited_budget: bool = False, name: str | None = None,
                  top1_mean: float = TOP1_MEAN) -> ExactReplay:
    """Step the real Engine over `specs` arriving by `rule`, null executor (see
    replay.engine_replay.null_engine), its pool accounted after every step."""
    engine = null_engine(profile, specs, unlimited_budget, top1_mean)
    eng = profile.engine
    rec = Recorder(name or f"paged-{eng.block_size} (scheduler)", eng.block_size,
                   engine.pool.num_blocks, eng.max_model_len)
    finished, rejected = record_engine(engine, specs, rule, rec)
    counters = dataclasses.replace(engine.pool.counters)
    return ExactReplay(rec.result(finished, rejected, engine.scheduler.num_preemptions,
                                  counters.copy_on_writes), counters, rec.cached_free)
