"""Fragmentation replays on the built-in profiles: the live engine agrees with both
replays; reference figures, KV budgets, the recommendation, replay cost."""

from __future__ import annotations

import pytest

from perfkit.config.profile import Overrides, load_profile, usable_blocks
from perfkit.engine.executor import TOP1_MEAN
from perfkit.errors import PerfkitError
from perfkit.fragmentation.exact import replay_scheduler
from perfkit.fragmentation.groups import replay_paged
from perfkit.fragmentation.judgement import limiter, recommend, verdict
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.policies import FragConfig, kv_budget, simulate, weight_bytes
from perfkit.fragmentation.trace import lengths_trace, specs_trace
from perfkit.workload import generate


@pytest.mark.parametrize("name", ["default", "sharegpt", "alpaca", "shared-prefix", "tool-calls",
                                  "bursty", "long-context", "two-priorities"])
def test_lengths_trace_equals_generate(name):
    prio = ("workload.priorities=[{priority = 0, weight = 3.0}, {priority = 1, weight = 1.0}]",)
    prof = load_profile("default", Overrides(sets=prio)) if name == "two-priorities" \
        else load_profile(name)
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 200)
    expect = specs_trace(specs, prof.workload.shared_prefix.length, prof.engine.max_model_len,
                         "profile", 0.01)
    assert lengths_trace(prof, 200, "profile", 0.01) == expect
    saturated = specs_trace(specs, prof.workload.shared_prefix.length,
                            prof.engine.max_model_len)
    assert lengths_trace(prof, 200) == saturated  # the columns path (lengths.py)


def test_fast_replay_matches_scheduler_on_a_small_profile():
    prof = load_profile("shared-prefix", Overrides(sets=(
        "engine.num_blocks=4000", "engine.max_num_batched_tokens=100000")))
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 40)
    tr = specs_trace(specs, prof.workload.shared_prefix.length, prof.engine.max_model_len)
    fast = simulate_paged(tr, usable_blocks(prof), prof.engine.block_size, prof.engine.max_num_seqs,
                          prof.engine.prefix_caching, timeline=True)
    exact = replay_scheduler(prof, specs, list(tr.arrivals.steps)).result
    assert fast.saved_block_steps > 0
    assert fast.timeline == exact.timeline and fast.totals == exact.totals


def test_fast_replay_approximates_the_engine_with_prefix_caching_under_pressure():
    """docs/commands/fragmentation.md, "Limits": shared-prefix, 300 requests, 127 blocks of
    16 (--kv-memory 2MiB): 41 preemptions to the engine's 47, the same steps and peak,
    every share within 0.06 percentage points."""
    prof = load_profile("shared-prefix")
    tr, eng = lengths_trace(prof, 300), prof.engine
    fast = simulate_paged(tr, 127, 16, eng.max_num_seqs, True,
                          max_num_batched_tokens=eng.max_num_batched_tokens)
    exact = replay_paged(prof, tr, "engine", 16, 127, True, TOP1_MEAN)
    assert (fast.num_preempted, exact.num_preempted) == (41, 47)
    assert (fast.num_steps, fast.peak_step) == (exact.num_steps, exact.peak_step)
    a, b = fast.totals, exact.totals
    assert abs(a.used_of_occupied - b.used_of_occupied) < 0.0006
    assert all(abs(a.shares()[k] - b.shares()[k]) < 0.0006 for k in a.shares())


# -- the engine ------------------------------------------------------------------------------
def _engine_or_skip():
    try:
        from perfkit.engine.engine import Engine
    except ImportError as err:
        pytest.skip(f"perfkit.engine.engine does not import yet: {err}")
    return Engine


@pytest.fixture
def one_torch_thread():
    """The tiny model is all overhead: extra intra-op threads only spin on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_engine_agrees_with_both_replays_on_default_profile(one_torch_thread):
    _engine_or_skip()
    from perfkit.fragmentation.live import live

    prof = load_profile("default", Overrides(sets=(
        "engine.num_blocks=12", "engine.max_num_batched_tokens=100000",
        "workload.prompt_len.mean=40", "workload.prompt_len.std=20", "workload.prompt_len.min=4",
        "workload.output_len.min=4", "workload.output_len.max=12")))
    rep = live(prof, 8, "saturate", 0.025)
    assert rep.engine.timeline == rep.kv_timeline  # our accounting = the engine's own samples
    assert rep.engine.num_preempted > 0  # the pool is tight enough to preempt
    assert all(a.exact for a in rep.agreements), rep.agreements
    assert rep.engine.totals == rep.replays[0].totals == rep.replays[1].totals
    assert rep.engine.peak_sequences == rep.replays[0].peak_sequences \
        == rep.replays[1].peak_sequences
    assert rep.counters.allocations > 0 and rep.memory.rss_peak_bytes > 0


def test_engine_agrees_with_scheduler_replay_under_chunked_prefill(one_torch_thread):
    _engine_or_skip()
    from perfkit.fragmentation.live import live

    prof = load_profile("default", Overrides(sets=(
        "engine.num_blocks=24", "workload.output_len.min=4", "workload.output_len.max=12")))
    rep = live(prof, 6, "saturate", 0.025)  # the profile's budget (256) chunks prompts
    scheduler = rep.agreements[0]
    assert scheduler.exact, scheduler
    assert rep.engine.timeline == rep.replays[0].timeline
    assert rep.engine.num_finished == 6


def test_weight_bytes_counts_the_engine_model():

    model = load_profile("default", Overrides(model="llama3-8b")).model
    assert weight_bytes(model) == model.num_parameters * 2


# -- the whole analysis --------------------------------------------------------------------
def test_simulate_reference_shape_opt13b():
    prof = load_profile("sharegpt", Overrides(model="opt-13b"))
    rep = simulate(prof, kv_budget(prof, "12GiB", None), FragConfig(num_requests=1500, jobs=2))
    by = {p.name: p for p in rep.policies}
    assert 0.2 <= by["reserve-max"].totals.used_of_occupied <= 0.4
    assert by["paged-16"].totals.used_of_occupied >= 0.96
    assert by["reserve-max"].totals.used_of_occupied < by["pow2"].totals.used_of_occupied \
        < by["oracle"].totals.used_of_occupied < by["paged-16"].totals.used_of_occupied
    assert by["paged-16+prefix"].totals == by["paged-16"].totals  # no shared prefix
    assert rep.recommendation.block_size == 16
    assert "occupied memory holds tokens" in verdict(by["oracle"])


def test_limiter_says_when_the_batch_cap_not_memory_bounds_the_run():
    prof = load_profile("sharegpt", Overrides(model="opt-13b"))
    roomy = simulate(prof, kv_budget(prof, "64GiB", None), FragConfig(num_requests=300))
    kind, reason = limiter(roomy)
    assert kind == "batch cap" and "max_num_seqs 64" in reason
    tight = simulate(prof, kv_budget(prof, "1GiB", None), FragConfig(num_requests=300))
    assert limiter(tight)[0] == "memory"


def test_recommend_prefers_larger_blocks_within_tolerance():
    prof = load_profile("sharegpt", Overrides(model="opt-13b"))
    rep = simulate(prof, kv_budget(prof, "12GiB", None),
                   FragConfig(block_sizes=(16, 32), num_requests=300, jobs=1))
    paged = [p for p in rep.policies if p.name in ("paged-16", "paged-32")]
    assert recommend(paged, tolerance=1.0).block_size == 32
    assert recommend(paged, tolerance=0.0).block_size == 16


def test_budget_sources():
    prof = load_profile("sharegpt", Overrides(model="opt-13b"))
    assert kv_budget(prof, "12GiB", None).slots == 15728  # the paper's ~15.7K slots
    h100 = kv_budget(prof, None, "h100")
    assert h100.bytes == int(80e9 * 0.9) - weight_bytes(prof.model)
    own = kv_budget(prof, None, None)
    assert own.bytes == 2048 * 16 * prof.model.kv_bytes_per_token
    with pytest.raises(PerfkitError, match="--gpu"):
        kv_budget(prof, None, "tpu")
    with pytest.raises(PerfkitError, match="no room"):
        kv_budget(load_profile("default", Overrides(model="llama3-70b")), None, "a100-40g")


def test_replay_work_grows_linearly_with_requests():
    """Not a timed test: the replay's work (steps walked, admissions) per request stays
    flat as the trace grows, so its cost is linear (timings: docs/validation/replay-speed.md)."""
    prof = load_profile("sharegpt", Overrides(model="opt-13b"))
    per_request = []
    for n in (1000, 4000):
        tr = lengths_trace(prof, n)
        r = simulate_paged(tr, 983, 16, 64)
        per_request.append((r.num_steps + r.num_preempted) / n)
    assert per_request[1] == pytest.approx(per_request[0], rel=0.15)
