"""Fragmentation replays: exact waste on hand-computed traces, invariants, and agreement
of the fast paged replay with the real Scheduler/BlockPool and the Engine."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_fixtures import engine_profile, specs_for, trace

from perfkit import jit
from perfkit.fragmentation import contiguous_kernel
from perfkit.fragmentation.contiguous import (
    reserve_exact,
    reserve_max,
    reserve_pow2,
    simulate_contiguous,
)
from perfkit.fragmentation.exact import replay_scheduler
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.types import Slots


# -- first fit ---------------------------------------------------------------------------
def test_first_fit_places_lowest_hole_and_merges():
    k = jit.pure(contiguous_kernel)
    hs, hl, s = [0] * 8, [0] * 8, [0] * k.NUM_SCALARS
    hl[0], s[k.NH] = 10, 1

    def holes():
        return hs[: s[k.NH]], hl[: s[k.NH]]

    assert [k.place(hs, hl, s, 3), k.place(hs, hl, s, 4), k.place(hs, hl, s, 2)] == [0, 3, 7]
    k.release(hs, hl, s, 3, 4)
    assert holes() == ([3, 9], [4, 1])
    assert k.place(hs, hl, s, 1) == 3  # first fit (best fit would take the 1-slot hole at 9)
    assert k.place(hs, hl, s, 5) == -1
    for start, n in ((0, 3), (7, 2), (3, 1)):  # the last free merges both sides
        k.release(hs, hl, s, start, n)
    assert holes() == ([0], [10])


# -- contiguous policies, hand-computed -------------------------------------------------
# R0 (P3, M2, kv 4), R1 (P2, M4, kv 5), R2 (P3, M3, kv 5) on a 10-slot pool.
HAND = [(3, 2), (2, 4), (3, 3)]


def test_oracle_exact_waste_and_external_fragmentation():
    r = simulate_contiguous(trace(HAND), 10, reserve_exact, 64, "oracle")
    # step 0: R0 [0,4), R1 [4,9); R2 needs 5 but only [9,10) is free (external 1).
    # step 1: R0 ends; holes 4 + 1 both < 5: 5 slots free but unusable.
    assert r.num_steps == 7
    assert r.totals == Slots(used=19, reserved=10, internal=0, external=11, free=30)
    assert r.peak == Slots(5, 4, 0, 1, 0) and r.peak_step == 0
    assert r.free_gap_sum == pytest.approx(0.2 + 0.2)  # steps 1-2: 1 - 4/5
    assert (r.peak_sequences, r.num_queued_for_memory, r.num_finished) == (2, 1, 3)


def test_reserve_max_exact_waste():
    r = simulate_contiguous(trace(HAND), 10, reserve_max, 64, "reserve-max")
    assert r.num_steps == 9  # one request at a time: 8 slots each in a 10-slot pool
    assert r.totals == Slots(used=19, reserved=10, internal=19, external=8, free=34)
    assert r.peak == Slots(3, 1, 4, 2, 0)


def test_pow2_exact_waste():
    r = simulate_contiguous(trace(HAND), 10, reserve_pow2, 64, "pow2")
    assert r.totals == Slots(used=19, reserved=10, internal=15, external=12, free=34)
    assert reserve_pow2(5, 8) == 8 and reserve_pow2(4, 8) == 4 and reserve_pow2(700, 512) == 512


def test_contiguous_rejects_what_can_never_fit():
    r = simulate_contiguous(trace([(8, 1), (3, 2), (2, 9)], mml=8), 6, reserve_max, 64, "m")
    assert r.num_rejected == 3  # prompt >= max_model_len; reservations of 8 > 6 slots


# -- paged, hand-computed -----------------------------------------------------------------
def test_paged_exact_waste_with_internal_tail():
    # bs 4, 4 blocks. R0 (P5, M3, kv 7): 2 blocks, 1 slot never used. R1 (P4, M6, kv 9):
    # 3 blocks at the end, 3 never used. R2 (P9, M2) needs 3 blocks and waits until step 6.
    tr = trace([(5, 3), (4, 6), (9, 2)], mml=16)
    r = simulate_paged(tr, 4, 4, 64, timeline=True)
    assert r.num_steps == 8
    assert r.totals == Slots(used=50, reserved=10, internal=4, external=0, free=64)
    assert r.peak == Slots(11, 4, 1, 0, 0) and r.peak_step == 1
    assert r.timeline == [(3, 9), (4, 11), (2, 6), (2, 7), (2, 8), (0, 0), (3, 9), (0, 0)]
    assert (r.num_queued_for_memory, r.num_preempted, r.peak_sequences) == (1, 0, 2)


def test_paged_preemption_recomputes_newest():
    # bs 2, 3 blocks: at step 1 both need a block, one is free: R1 (newest) is preempted
    # and comes back at step 4 with prompt + 1 generated token (2 blocks).
    tr = trace([(2, 4), (2, 3)], mml=8)
    r = simulate_paged(tr, 3, 2, 64, timeline=True)
    assert r.num_preempted == 1
    assert r.timeline == [(2, 4), (2, 3), (2, 4), (0, 0), (2, 3), (0, 0)]
    assert r.totals == Slots(used=14, reserved=2, internal=0, external=0, free=20)


def test_paged_prefix_sharing_saves_blocks():
    # bs 2, 4-token prefix = 2 shared blocks. R0 computes it at step 0; R1 arrives at
    # step 1 and shares it (needs 1 own block instead of 3).
    tr = trace([(5, 3), (5, 3)], mml=16, arrivals=[0, 1], groups=[0, 0], prefix_len=4)
    r = simulate_paged(tr, 8, 2, 64, prefix_caching=True, timeline=True)
    assert r.timeline == [(3, 5), (4, 7), (3, 6), (0, 0)]
    assert r.totals == Slots(used=18, reserved=2, internal=0, external=0, free=44)
    assert (r.saved_block_steps, r.peak_saved_blocks) == (2, 2)
    plain = simulate_paged(tr, 8, 2, 64, prefix_caching=False)
    assert plain.saved_block_steps == 0 and plain.totals.free < r.totals.free


@pytest.mark.parametrize("case", ["internal", "preempt", "prefix"])
def test_hand_traces_match_the_real_scheduler(case):
    tr, bs, blocks, caching = {
        "internal": (trace([(5, 3), (4, 6), (9, 2)], mml=16), 4, 4, False),
        "preempt": (trace([(2, 4), (2, 3)], mml=8), 2, 3, False),
        "prefix": (trace([(5, 3), (5, 3)], 16, [0, 1], [0, 0], 4), 2, 8, True),
    }[case]
    fast = simulate_paged(tr, blocks, bs, 64, caching, timeline=True)
    exact = replay_scheduler(engine_profile(bs, blocks, tr.max_model_len, caching=caching),
                             specs_for(tr), list(tr.arrivals.steps)).result
    assert fast.timeline == exact.timeline
    assert fast.totals == exact.totals and fast.peak == exact.peak


# -- invariants and agreement on random traces -------------------------------------------
requests_st = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1,
                       max_size=25)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests_st, st.sampled_from([1, 2, 4, 16]), st.integers(4, 40), st.integers(1, 8),
       st.lists(st.integers(0, 30), min_size=25, max_size=25),
       st.lists(st.integers(0, 2), min_size=25, max_size=25), st.booleans())
def test_kinds_sum_to_the_pool_and_paged_matches_scheduler(reqs, bs, blocks, seqs, gaps,
                                                          prios, use_prios):
    arrivals = sorted(gaps[: len(reqs)])
    tr = trace(reqs, mml=64, arrivals=arrivals)
    if use_prios:  # the heap paths: queue by (priority, arrival), victims newest-lowest
        tr.priority = prios[: len(reqs)]
    results = [simulate_paged(tr, blocks, bs, seqs, timeline=True)]
    results += [simulate_contiguous(tr, blocks * bs, f, seqs, "c")
                for f in (reserve_max, reserve_pow2, reserve_exact)]
    for r in results:
        for s in (r.totals, r.peak):
            assert min(s.used, s.reserved, s.internal, s.external, s.free) >= 0
        assert r.totals.total == r.pool_slots * r.num_steps
        assert r.peak.total == r.pool_slots or r.num_steps == 0
        assert r.num_finished + r.num_rejected == len(reqs)
    exact = replay_scheduler(engine_profile(bs, blocks, 64, seqs), specs_for(tr), arrivals).result
    fast = results[0]
    assert fast.timeline == exact.timeline
    assert (fast.totals, fast.num_preempted, fast.num_rejected) == (
        exact.totals, exact.num_preempted, exact.num_rejected)
