"""The paged replay under a token budget (chunked prefill), both admission rules and closed
loops, step for step against the real Engine (null executor); the compiled kernels equal
the plain-Python ones."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fragmentation import specs_for, trace

from perfkit.config.profile import Overrides, load_profile
from perfkit.fragmentation.contiguous import reserve_pow2, simulate_contiguous
from perfkit.fragmentation.exact import replay_scheduler
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.trace import closed_loop, lengths_trace
from perfkit.fragmentation.types import PolicyResult, Trace

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
requests_st = st.lists(st.tuples(st.integers(1, 60), st.integers(1, 30)), min_size=1,
                       max_size=20)


def engine_profile(bs: int, blocks: int, seqs: int, budget: int, admission: str,
                   mml: int = 96):
    return load_profile("default", Overrides(sets=(
        f"engine.block_size={bs}", f"engine.num_blocks={blocks + 1}",  # + the null block
        f"engine.max_model_len={mml}",
        f"engine.max_num_seqs={seqs}", "engine.prefix_caching=false",
        f"engine.max_num_batched_tokens={budget}", f"engine.admission={admission}")))


def both(tr: Trace, bs: int, blocks: int, seqs: int, budget: int, admission: str
         ) -> tuple[PolicyResult, PolicyResult]:
    """(fast replay, engine replay) of one trace under the same rules."""
    fast = simulate_paged(tr, blocks, bs, seqs, timeline=True, max_num_batched_tokens=budget,
                          full_prompt=admission == "full_prompt")
    spans = simulate_paged(tr, blocks, bs, seqs, max_num_batched_tokens=budget,
                           full_prompt=admission == "full_prompt")  # decode spans at once
    assert spans == dataclasses.replace(fast, timeline=[])
    exact = replay_scheduler(engine_profile(bs, blocks, seqs, budget, admission,
                                            tr.max_model_len), specs_for(tr),
                             tr.arrival_step, clients=tr.clients,
                             client_delay=tr.client_delay).result
    return fast, exact


def assert_same(fast: PolicyResult, exact: PolicyResult) -> None:
    assert fast.timeline == exact.timeline
    assert (fast.totals, fast.peak, fast.peak_step) == (exact.totals, exact.peak,
                                                       exact.peak_step)
    assert (fast.num_preempted, fast.num_finished, fast.num_rejected, fast.peak_sequences) == (
        exact.num_preempted, exact.num_finished, exact.num_rejected, exact.peak_sequences)


def test_a_long_prompt_is_chunked_over_steps():
    # budget 8: R0's 20-token prompt takes steps 0-2 (8, 8, 4 tokens); R1 (3 tokens) is
    # admitted in step 2 with the 4 tokens left, behind R0's last chunk.
    tr = trace([(20, 3), (3, 2)], mml=64)
    fast, exact = both(tr, 4, 16, 8, 8, "full_prompt")
    assert fast.timeline[:3] == [(2, 8), (4, 16), (6, 23)]  # 5 + 1 blocks
    assert_same(fast, exact)


def test_the_budget_decides_preemptions():
    """A budget of 8 tokens admits one 6-token prompt a step: the requests are spread, so
    fewer need their next block in the same step (6 preemptions, not 8)."""
    tr = trace([(6, 16)] * 8, mml=64)
    assert simulate_paged(tr, 14, 4, 8).num_preempted == 8  # no budget
    fast, exact = both(tr, 4, 14, 8, 8, "full_prompt")
    assert_same(fast, exact)
    assert (fast.num_preempted, fast.num_steps) == (6, 49)


@SETTINGS
@given(requests_st, st.sampled_from([1, 2, 4, 8]), st.integers(8, 40), st.integers(1, 6),
       st.integers(1, 48), st.sampled_from(["full_prompt", "first_chunk"]),
       st.lists(st.integers(0, 20), min_size=20, max_size=20),
       st.lists(st.integers(0, 2), min_size=20, max_size=20), st.booleans())
def test_budget_replay_matches_the_engine(reqs, bs, blocks, seqs, budget, admission, gaps,
                                          prios, use_prios):
    tr = trace(reqs, mml=96, arrivals=sorted(gaps[: len(reqs)]))
    if use_prios:
        tr.priority = prios[: len(reqs)]
    assert_same(*both(tr, bs, blocks, seqs, budget, admission))


@SETTINGS
@given(requests_st, st.sampled_from([2, 4, 16]), st.integers(8, 40), st.integers(1, 6),
       st.integers(4, 64), st.integers(1, 6), st.integers(0, 8))
def test_closed_loop_matches_the_engine(reqs, bs, blocks, seqs, budget, clients, delay):
    tr = closed_loop(trace(reqs, mml=96), clients, delay)
    assert_same(*both(tr, bs, blocks, seqs, budget, "full_prompt"))


def test_client_delay_spreads_the_load():
    """A later next request: fewer running at once, fewer preemptions, more steps."""
    prof = load_profile("default")
    base = lengths_trace(prof, 200, "closed", clients=16)
    runs = [simulate_paged(dataclasses.replace(base, client_delay=d), 40, 32, 16,
                           max_num_batched_tokens=2048) for d in (0, 40)]
    assert runs[0].num_preempted > runs[1].num_preempted
    assert runs[0].num_steps < runs[1].num_steps
    assert all(r.num_finished == 200 for r in runs)


# -- compiled == plain Python ---------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["default", "sharegpt", "shared-prefix"]), st.integers(0, 1000),
       st.sampled_from([8, 16, 32]), st.integers(20, 400), st.integers(1, 64),
       st.sampled_from([64, 256, 1 << 40]), st.sampled_from(["saturate", "profile", "closed"]),
       st.booleans())
def test_compiled_replays_equal_plain_python(name, seed, bs, blocks, seqs, budget, arrivals,
                                             caching):
    prof = load_profile(name, Overrides(sets=(f"workload.seed={seed}",)))
    tr = lengths_trace(prof, 120, arrivals, 0.01, clients=seqs)
    for timeline in (True, False):
        runs = [simulate_paged(tr, blocks, bs, seqs, caching, timeline=timeline,
                               max_num_batched_tokens=budget, use_jit=j) for j in (True, False)]
        assert runs[0] == runs[1]
    assert runs[0] == dataclasses.replace(simulate_paged(
        tr, blocks, bs, seqs, caching, timeline=True, max_num_batched_tokens=budget),
        timeline=[])
    runs = [simulate_contiguous(tr, blocks * bs, reserve_pow2, seqs, "pow2", use_jit=j)
            for j in (True, False)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("jit", [True, False])
def test_expected_counts_both_ways(jit):
    """Hand-computed figures (test_fragmentation) hold compiled and plain."""
    tr = trace([(2, 4), (2, 3)], mml=8)
    r = simulate_paged(tr, 3, 2, 64, timeline=True, use_jit=jit)
    assert r.num_preempted == 1
    assert r.timeline == [(2, 4), (2, 3), (2, 4), (0, 0), (2, 3), (0, 0)]
