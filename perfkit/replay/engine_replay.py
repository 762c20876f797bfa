"""The reference replay: the real Engine with the null executor, by the arrival rule.

`null_engine` is the Engine over a profile's scheduling rules with the null executor: no
tensors, no torch, and every sampled token the fixed id NULL_TOKEN. The guard is off
(tool calls and loops would end requests early by token value) and the waiting queue is
not capped (max_waiting raised to the number of requests: a replay measures memory, not
the front door's queue limit). Its scheduling does not depend on token values except
through prefix hashes of generated tokens, which no other request shares.

`run_engine` is the one step loop every engine replay shares (fragmentation/exact.py,
fragmentation/live.py with the model): requests arrive by the arrival rule
(`arrivals.drive`), and a hook sees each step's plan and finishes. `engine_decisions`
logs the decisions as the paged kernel logs them (paged_layout's lg rows), for
tests/replay/test_conformance.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import TOP1_MEAN, null_executor
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.replay import paged_layout as pl
from perfkit.replay.arrivals import ArrivalRule, drive
from perfkit.replay.paged import UNLIMITED, Decision
from perfkit.workload import RequestSpec

NULL_TOKEN = 1  # what the null executor "samples"
# after each step: (its step, its plan, the requests it finished, by seq_id); a step
# whose plan scheduled nothing (only preempted) ran no request
StepHook = Callable[[int, SchedulerOutput, list[int]], None]
ArrivalHook = Callable[[int, int, bool], None]  # (step, request, rejected)


def null_engine(profile: Profile, specs: list[RequestSpec], unlimited_budget: bool = False,
                top1_mean: float = TOP1_MEAN) -> Engine:
    """The Engine with the null executor over `specs` (see module doc). Requests with
    several outputs sample distinct tokens, and their beams keep and drop by the null
    executor's synthetic log-probabilities of mean top-1 probability `top1_mean`."""
    eng = profile.engine
    replay = dataclasses.replace(
        eng, guard=False, max_waiting=max(len(specs), 1),
        max_num_batched_tokens=UNLIMITED if unlimited_budget else eng.max_num_batched_tokens)
    groups = any(max(s.n, s.beam_width) > 1 for s in specs)
    engine = Engine(dataclasses.replace(profile, engine=replay),
                    executor=null_executor(None if groups else NULL_TOKEN, top1_mean))
    engine.record_timeline = False  # a replay accounts every step itself
    return engine


def run_engine(engine: Engine, specs: list[RequestSpec], rule: ArrivalRule,
               on_step: StepHook | None = None, on_arrival: ArrivalHook | None = None
               ) -> tuple[int, int]:
    """Submit specs[i] when the rule says (on_arrival sees each), step the engine, and
    call on_step after every step. Returns (finished, rejected)."""
    last: list[SchedulerOutput] = [SchedulerOutput()]  # the plan of the latest step
    engine.on_step = lambda out: last.__setitem__(0, out)
    finished = 0

    def add(i: int, t: int) -> bool:
        rejected = engine.add_request(specs[i])[1] is not None
        if on_arrival is not None:
            on_arrival(t, i, rejected)
        return rejected

    def step(t: int, more_arrivals: bool) -> int:
        nonlocal finished
        before = engine.stats.steps
        done = [e.request.seq_id for e in engine.step() if e.finished]
        finished += len(done)
        out = last[0]
        if on_step is not None:
            on_step(t, out, done)
        if engine.stats.steps == before and not more_arrivals and not out.preempted:
            raise RuntimeError("scheduler made no progress")  # an engine bug, not user input
        return len(done)

    rejected = drive(rule, len(specs), add, lambda: engine.has_work, step)
    return finished, rejected


def engine_decisions(profile: Profile, specs: list[RequestSpec], rule: ArrivalRule
                     ) -> list[Decision]:
    """Every decision of the Engine (null executor), as `replay.paged.run_paged` logs the
    kernel's: arrivals, then per step preemptions, admissions, each scheduled request's
    tokens (and its finish), the blocks used after the step."""
    engine = null_engine(profile, specs)
    log: list[Decision] = []

    def arrival(t: int, i: int, rejected: bool) -> None:
        log.append((t, pl.REJECT if rejected else pl.ARRIVE, i, 0))

    def step(t: int, out: SchedulerOutput, done: list[int]) -> None:
        log.extend((t, pl.PREEMPT, seq.seq_id, 0) for seq in out.preempted)
        log.extend((t, pl.ADMIT, seq.seq_id, 0) for seq in out.admitted)
        for item in out.scheduled:
            log.append((t, pl.SCHEDULE, item.seq.seq_id, item.num_new_tokens))
            if item.seq.seq_id in done:
                log.append((t, pl.FINISH, item.seq.seq_id, 0))
        if out.scheduled:
            log.append((t, pl.STEP, -1, engine.pool.num_used_blocks))

    run_engine(engine, specs, rule, step, arrival)
    return log
