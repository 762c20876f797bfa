"""Waste accounting over the real engine: with the null executor, or with the model.

`replay_scheduler` steps the real `Engine` (its one step loop: schedule -> execute ->
commit -> append -> finish at max_tokens or max_model_len) with the null executor: no
tensors, no torch, and every sampled token is the fixed id NULL_TOKEN. The guard is off
(the replay counts memory; tool calls and loops would end requests early by token
value). It is the reference the fast paged replay is tested against, and the engine's
scheduling does not depend on token values except through prefix hashes of generated
tokens, which no other request shares. `record_engine` is the loop it shares with the
live run (fragmentation/live.py), so both see the same step clock and accounting.

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
The waiting queue is not capped (max_waiting is raised to the number of requests):
the replay measures memory, not the front door's queue limit. A closed loop assigns
arrivals as requests finish, by the paged kernel's rule (`drive_arrivals`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from perfkit.config.schema import Profile
from perfkit.engine.blocks import BlockPool, PoolCounters
from perfkit.engine.engine import Engine
from perfkit.engine.executor import TOP1_MEAN, null_executor
from perfkit.engine.kv_manager import table_tails
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence
from perfkit.fragmentation.types import NEVER, PolicyResult, Slots
from perfkit.workload import RequestSpec

NULL_TOKEN = 1  # what the null executor "samples"
UNLIMITED = 1 << 40  # a token budget no step reaches


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


def drive_arrivals(arrival_steps: list[int], add: Callable[[int], bool],
                   has_work: Callable[[], bool], step: Callable[[int, bool], int],
                   clients: int = 0, delay: int = 0) -> int:
    """Submit request i at step arrival_steps[i] (add(i) says whether it was rejected), call
    step(t, more_arrivals) at every step with work (it returns the requests that finished),
    jump over idle gaps. Returns the number of rejections. Shared by the scheduler replay
    and the live engine run, so both see the same step clock.

    Closed loop (clients > 0; arrival_steps ignored): the first `clients` requests arrive
    at step 0; a finish in step t brings the next request at t + 1 + delay, a rejection at
    t + delay (the paged kernel's rule)."""
    num = len(arrival_steps)
    arrival = list(arrival_steps) if not clients else \
        [0 if i < clients else NEVER for i in range(num)]
    assigned = min(clients, num)

    def answered(at: int) -> None:
        nonlocal assigned
        if clients and assigned < num:
            arrival[assigned] = at
            assigned += 1

    rejected = nxt = 0
    t = arrival[0] if num else 0
    while nxt < num or has_work():
        while nxt < num and arrival[nxt] <= t:
            if add(nxt):
                rejected += 1
                answered(t + delay)
            nxt += 1
        if not has_work():
            if nxt >= num or arrival[nxt] >= NEVER:
                break
            t = arrival[nxt]
            continue
        for _ in range(step(t, nxt < num)):
            answered(t + 1 + delay)
        t += 1
    return rejected


def record_engine(engine: Engine, specs: list[RequestSpec], arrival_steps: list[int],
                  rec: Recorder, after_step: Callable[[], None] | None = None,
                  clients: int = 0, delay: int = 0) -> tuple[int, int]:
    """Submit specs[i] at step arrival_steps[i] (or closed loop, see drive_arrivals), step
    the engine, and record its pool after every step that ran a request (then call
    after_step). Returns (finished, rejected)."""
    last: list[SchedulerOutput] = [SchedulerOutput()]  # the plan of the latest step
    engine.on_step = lambda out: last.__setitem__(0, out)
    finished = 0

    def step(t: int, more_arrivals: bool) -> int:
        nonlocal finished
        before = engine.stats.steps
        done = sum(event.finished for event in engine.step())
        finished += done
        out = last[0]
        if engine.stats.steps > before:
            rec.record(t, engine.pool, engine.scheduler.running, len(out.scheduled))
            if after_step is not None:
                after_step()
        elif not more_arrivals and not out.preempted:
            raise RuntimeError("scheduler made no progress")  # an engine bug, not user input
        return done

    rejected = drive_arrivals(
        arrival_steps, lambda i: engine.add_request(specs[i])[1] is not None,
        lambda: engine.has_work, step, clients, delay,
    )
    return finished, rejected


def replay_scheduler(
    profile: Profile, specs: list[RequestSpec], arrival_steps: list[int],
    unlimited_budget: bool = False, name: str | None = None, clients: int = 0,
    client_delay: int = 0, top1_mean: float = TOP1_MEAN,
) -> ExactReplay:
    """Step the real Engine over `specs` (arriving at `arrival_steps`, or sent by `clients`
    clients `client_delay` steps after each answer), null executor. Requests with several
    outputs sample distinct tokens (a preempted group's outputs share their common prefix
    only), and their beams keep and drop by the null executor's synthetic
    log-probabilities of mean top-1 probability `top1_mean`."""
    eng = profile.engine
    replay = dataclasses.replace(
        eng, guard=False, max_waiting=max(len(specs), 1),
        max_num_batched_tokens=UNLIMITED if unlimited_budget else eng.max_num_batched_tokens)
    groups = any(max(s.n, s.beam_width) > 1 for s in specs)
    engine = Engine(dataclasses.replace(profile, engine=replay),
                    executor=null_executor(None if groups else NULL_TOKEN, top1_mean))
    engine.record_timeline = False  # the Recorder accounts every step itself
    rec = Recorder(name or f"paged-{eng.block_size} (scheduler)", eng.block_size,
                   engine.pool.num_blocks, eng.max_model_len)
    finished, rejected = record_engine(engine, specs, arrival_steps, rec, None, clients,
                                       client_delay)
    counters = dataclasses.replace(engine.pool.counters)
    return ExactReplay(rec.result(finished, rejected, engine.scheduler.num_preemptions,
                                  counters.copy_on_writes), counters, rec.cached_free)
