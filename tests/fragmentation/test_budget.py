"""The paged replay under a token budget (chunked prefill) and closed loops: hand traces
against the real Engine (null executor), the client delay's effect; the compiled kernels
equal the plain-Python ones on profile traces. tests/replay/test_conformance.py compares
every decision on random traces."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_fixtures import cases, engine_profile, specs_for, trace

from perfkit.config.profile import Overrides, load_profile
from perfkit.fragmentation.contiguous import reserve_pow2, simulate_contiguous
from perfkit.fragmentation.exact import replay_engine
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.trace import closed_loop, lengths_trace
from perfkit.fragmentation.types import PolicyResult
from perfkit.replay.trace import Trace


def both(tr: Trace, bs: int, blocks: int, seqs: int, budget: int, admission: str
         ) -> tuple[PolicyResult, PolicyResult]:
    """(fast replay, engine replay) of one trace under the same rules."""
    fast = simulate_paged(tr, blocks, bs, seqs, timeline=True, max_num_batched_tokens=budget,
                          full_prompt=admission == "full_prompt")
    spans = simulate_paged(tr, blocks, bs, seqs, max_num_batched_tokens=budget,
                           full_prompt=admission == "full_prompt")  # decode spans at once
    assert spans == dataclasses.replace(fast, timeline=[])
    exact = replay_engine(engine_profile(bs, blocks, tr.max_model_len, seqs, budget, admission),
                          specs_for(tr), tr.arrivals).result
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_pool_is_accounted_as_the_engines(case):
    """Blocks and slots by kind, step by step, peaks and counts, on the conformance test's
    cases (budgets, closed loops, preemptions)."""
    assert_same(*both(case.trace, case.bs, case.blocks, case.seqs, case.budget,
                      case.admission))


def test_client_delay_spreads_the_load():
    """A later next request: fewer running at once, fewer preemptions, more steps."""
    prof = load_profile("default")
    base = lengths_trace(prof, 200, "closed", clients=16)
    runs = [simulate_paged(closed_loop(base, 16, d), 40, 32, 16,
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
