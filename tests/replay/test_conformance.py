"""One serving model: every replay decides as the Engine does, step by step.

On the same random traces (open and closed loops, priorities, shared prefixes, pools
tight enough to preempt, token budgets that chunk prefills, both admission rules) the
Engine with the null executor (replay/engine_replay.py), the compiled paged kernel and
the same kernel as plain Python log every decision: arrivals and rejections, then per
step the preemptions, admissions, each scheduled request's tokens and finish, and the
blocks used after it. The logs must be equal. The arrival rule's two forms
(arrivals.ArrivalClock, arrivals_kernel) are tied directly as well.

Excluded: prefix caching on a pool that evicts or preempts, or with a token budget
that chunks a shared prefix. The kernel caches whole shared prefixes only; the Engine
hashes every full block, frees them to one LRU queue and evicts block by block. There
the kernel is tied to itself (compiled and plain alike, every request ending within
the pool), not to the Engine: replay.paged's doc says what differs, and
`test_where_prefix_caching_is_approximate` pins a trace of three of the differences.
"""

from __future__ import annotations

from itertools import groupby

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_fixtures import NO_BUDGET, Case, cases, specs_for

from perfkit import jit
from perfkit.replay import arrivals_kernel as ak
from perfkit.replay import paged_layout as pl
from perfkit.replay.arrivals import ArrivalClock, ClosedLoop, OpenLoop
from perfkit.replay.engine_replay import engine_decisions
from perfkit.replay.paged import Decision, run_paged

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KIND = {pl.ARRIVE: "arrive", pl.REJECT: "reject", pl.ADMIT: "admit", pl.SCHEDULE: "schedule",
        pl.PREEMPT: "preempt", pl.FINISH: "finish", pl.STEP: "blocks used"}


def by_step(log: list[Decision]) -> list[tuple[int, list[str]]]:
    """The decisions step by step, readable: (step, ["schedule 3: 8", ...])."""
    return [(t, [f"{KIND[k]} {i}: {v}" if k in (pl.SCHEDULE, pl.STEP) else f"{KIND[k]} {i}"
                 for _, k, i, v in rows]) for t, rows in groupby(log, key=lambda d: d[0])]


def assert_conforms(case: Case) -> list[Decision]:
    engine = engine_decisions(case.profile(), specs_for(case.trace), case.trace.arrivals)
    for use_jit in (True, False):
        kernel = run_paged(case.trace, case.pool(), log=True, use_jit=use_jit).decisions
        steps, expect = by_step(kernel), by_step(engine)
        first = next((k for k, (a, b) in enumerate(zip(steps, expect)) if a != b),
                     min(len(steps), len(expect)))
        assert steps[first:first + 1] == expect[first:first + 1], (
            f"{'compiled' if use_jit else 'plain'} kernel vs engine, first different step")
        assert kernel == engine
    return engine


@SETTINGS
@given(cases())
def test_every_replay_decides_as_the_engine(case):
    log = assert_conforms(case)
    assert sum(k == pl.FINISH for _, k, _, _ in log) + sum(
        k == pl.REJECT for _, k, _, _ in log) == case.trace.num_requests


@settings(SETTINGS, max_examples=100)
@given(cases(prefix=True))
def test_shared_prefixes_are_decided_alike(case):
    assert_conforms(case)


@settings(SETTINGS, max_examples=300)
@given(cases(prefix=True, pressure=True))
def test_shared_prefixes_under_memory_pressure_run_alike_compiled_and_plain(case):
    """Where the kernel approximates the Engine, its two forms still decide alike, every
    request ends, the blocks used stay within the pool, and the decode-only spans
    (paged_span: off with a log) add up to the steps."""
    logged = run_paged(case.trace, case.pool(), log=True)
    plain = run_paged(case.trace, case.pool(), log=True, use_jit=False).decisions
    assert logged.decisions == plain
    spans = run_paged(case.trace, case.pool()).s
    assert spans[pl.STEPS:pl.NTL] == logged.s[pl.STEPS:pl.NTL]
    assert sum(k in (pl.FINISH, pl.REJECT) for _, k, _, _ in plain) == case.trace.num_requests
    assert all(0 <= v <= case.blocks for _, k, _, v in plain if k == pl.STEP)


def test_a_prefix_computed_in_chunks_waits_for_all_its_blocks():
    """first_chunk admission, 2 tokens a step: r1 would compute its group's 2-block
    prefix, which the kernel takes whole at admission, so r1 waits for 2 free blocks (its
    chunk's 1 would overfill the pool at step 2)."""
    from replay_fixtures import trace

    case = Case(trace([(5, 2), (5, 1)], groups=[1, 0], prefix_len=4), 2, 4, 2, 2,
                "first_chunk", True)
    log = run_paged(case.trace, case.pool(), log=True).decisions
    assert [(t, i) for t, k, i, _ in log if k == pl.ADMIT] == [(0, 0), (4, 1)]
    assert max(v for _, k, _, v in log if k == pl.STEP) == 3


def first_difference(case: Case) -> tuple[list[str], list[str]]:
    """The first step whose decisions differ: (the kernel's, the Engine's)."""
    engine = by_step(engine_decisions(case.profile(), specs_for(case.trace), case.trace.arrivals))
    kernel = by_step(run_paged(case.trace, case.pool(), log=True).decisions)
    return next((a[1], b[1]) for a, b in zip(kernel, engine) if a != b)


def test_where_prefix_caching_is_approximate():
    """The kernel's prefix cache (whole shared prefixes) against the Engine's (every full
    block, one LRU queue): a trace of each difference replay.paged names, but partial
    eviction."""
    from replay_fixtures import trace

    # blocks of 1 token: r0 frees its own block and group 0's prefix, r1 its two blocks
    # after them, all cached in the Engine: r2 evicts the oldest two; r3 misses the prefix
    evict = trace([(2, 1)] * 4, groups=[0, -1, -1, 0], prefix_len=1)
    kernel, engine = first_difference(Case(evict, 1, 4, 1, NO_BUDGET, "full_prompt", True))
    assert (kernel[1], engine[1]) == ("schedule 3: 1", "schedule 3: 2")
    # r1, preempted at step 1, comes back to its own cached block in the Engine
    back = trace([(1, 2), (1, 2)])
    kernel, engine = first_difference(Case(back, 1, 3, 2, NO_BUDGET, "full_prompt", True))
    assert (kernel[1], engine[1]) == ("schedule 1: 2", "schedule 1: 1")
    # a 2-block prefix in chunks of 1 token: the kernel holds both blocks from the first
    chunked = trace([(3, 1)], groups=[0], prefix_len=2)
    kernel, engine = first_difference(Case(chunked, 1, 96, 1, 1, "full_prompt", True))
    assert (kernel[-1], engine[-1]) == ("blocks used -1: 2", "blocks used -1: 1")


def test_the_cases_reach_preemption_chunking_and_rejection():
    """The strategies reach what they are for (a fixed trace of each, logged)."""
    from replay_fixtures import trace

    tight = Case(trace([(6, 16)] * 8, mml=64), 4, 14, 8, 8, "full_prompt", False)
    log = assert_conforms(tight)
    kinds = {k for _, k, _, _ in log}
    assert {pl.PREEMPT, pl.ADMIT, pl.FINISH} <= kinds
    chunked = Case(trace([(20, 3), (3, 2)], mml=64), 4, 16, 8, 8, "first_chunk", False)
    assert [(t, i, v) for t, k, i, v in assert_conforms(chunked) if k == pl.SCHEDULE][:3] == [
        (0, 0, 8), (1, 0, 8), (2, 0, 4)]
    rejected = Case(trace([(8, 1), (3, 2)], mml=8), 2, 8, 8, 100, "full_prompt", False)
    rejected.trace.arrivals = ClosedLoop(1, 2)
    assert [d for d in assert_conforms(rejected) if d[1] in (pl.REJECT, pl.ARRIVE)] == [
        (0, pl.REJECT, 0, 0), (2, pl.ARRIVE, 1, 0)]  # the rejection's answer at t + delay


# -- the arrival rule's two forms -----------------------------------------------------------
@pytest.mark.parametrize("use_jit", [True, False])
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.one_of(st.none(), st.tuples(st.integers(1, 5),
                                                          st.integers(0, 6))),
       st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=15))
def test_the_compiled_arrival_rule_is_the_plain_one(use_jit, num, closed, answers):
    """A sequence of answers (step, rejected?) assigns the same arrival steps."""
    rule = OpenLoop(tuple(range(num))) if closed is None else ClosedLoop(*closed)
    clock = ArrivalClock(rule, num)
    mod = jit.kernel_module(ak, use_jit)
    req = ak.first_column(rule, num)
    cfg = [0, 0]
    cfg[ak.CLIENTS], cfg[ak.DELAY] = ak.rule_fields(rule)
    s = [0, 0, 0]
    s[ak.ASSIGNED], s[ak.NUM_REQ] = ak.assigned_at_start(rule, num), num
    import numpy as np

    cfg_a, s_a = np.array(cfg, np.int64), np.array(s, np.int64)
    for t, rejected in answers:
        (clock.rejected if rejected else clock.finished)(t)
        (mod.rejected if rejected else mod.finished)(req, 1, cfg_a, s_a, t)
    assert req.tolist() == clock.step
