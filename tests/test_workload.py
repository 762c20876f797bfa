from __future__ import annotations

import statistics

import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.config.workload import LengthDist, WorkloadConfig
from perfkit.errors import PerfkitError
from perfkit.workload import arrival_times, generate, output_counts, sample_length


def test_same_seed_same_requests_other_seed_differs():
    cfg = load_profile("default").workload
    assert generate(cfg, 512, 512) == generate(cfg, 512, 512)
    other = load_profile("default", Overrides(sets=("workload.seed=1",))).workload
    assert generate(other, 512, 512) != generate(cfg, 512, 512)


@pytest.mark.parametrize("kind", ["normal", "lognormal"])
def test_length_distribution_means(kind):
    import random

    dist = LengthDist(kind=kind, mean=161, std=100, min=1, max=100_000)
    rng = random.Random(0)
    values = [sample_length(dist, rng) for _ in range(20_000)]
    assert abs(statistics.mean(values) - 161) < 5  # clipping at 1 shifts normal a little


def test_bounds_and_fixed():
    import random

    rng = random.Random(0)
    dist = LengthDist(kind="uniform", min=5, max=9)
    assert {sample_length(dist, rng) for _ in range(500)} == {5, 6, 7, 8, 9}
    assert sample_length(LengthDist(kind="fixed", mean=12), rng) == 12


def test_outputs_fit_max_model_len_and_prefixes_shared():
    cfg = load_profile("shared-prefix").workload
    specs = generate(cfg, 512, 512)
    assert all(s.total_tokens <= 512 for s in specs)
    grouped = [s for s in specs if s.prefix_group is not None]
    assert len(grouped) > len(specs) // 2
    g = grouped[0]
    same = [s for s in grouped if s.prefix_group == g.prefix_group]
    assert all(s.prompt[:256] == g.prompt[:256] for s in same)


def test_arrivals():
    assert arrival_times("closed", 5, 3) == [0.0, 0.0, 0.0]
    assert arrival_times("burst", 8, 6, burst_size=3) == [0, 0, 0, 0.375, 0.375, 0.375]
    times = arrival_times("poisson", 10.0, 5000, seed=1)
    assert times == sorted(times)
    assert abs(times[-1] / 5000 - 0.1) < 0.01  # mean gap 1/rate


def test_priority_and_tool_call_mix():
    cfg = WorkloadConfig(num_requests=2000, tool_call_share=0.25)
    specs = generate(cfg, 100, 1024)
    share = sum(s.tool_call for s in specs) / len(specs)
    assert 0.2 < share < 0.3


@pytest.mark.parametrize("name", ["default", "sharegpt", "alpaca", "shared-prefix", "tool-calls"])
def test_lengths_only_gives_the_same_requests_without_tokens(name):
    prof = load_profile(name)
    args = (prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 300)
    full, lengths = generate(*args), generate(*args, tokens=False)
    assert [(s.request_id, len(s.prompt), s.max_tokens, s.priority, s.arrival_s,
             s.prefix_group, s.tool_call) for s in full] == [
        (r.request_id, r.prompt_len, r.max_tokens, r.priority, r.arrival_s, r.prefix_group,
         r.tool_call) for r in lengths]
    assert all(not hasattr(r, "prompt") for r in lengths)
    assert [s.prompt_len for s in full] == [r.prompt_len for r in lengths]


def test_outputs_per_request_fixed_or_drawn_move_no_other_draw():
    base = load_profile("default")
    fixed = load_profile("default", Overrides(sets=("workload.n=4",)))
    drawn = load_profile("default", Overrides(sets=(
        'workload.beam_width={kind="uniform", min=2, max=5}',)))
    plain = generate(base.workload, 512, 512, 30)
    for prof in (fixed, drawn):
        specs = generate(prof.workload, 512, 512, 30)
        assert [s.prompt for s in specs] == [s.prompt for s in plain]
        assert [s.max_tokens for s in specs] == [s.max_tokens for s in plain]
    assert {s.n for s in generate(fixed.workload, 512, 512, 30)} == {4}
    widths = [s.beam_width for s in generate(drawn.workload, 512, 512, 30)]
    assert set(widths) == {2, 3, 4, 5} and widths == output_counts(drawn.workload, 30)[1]


@pytest.mark.parametrize(("sets", "message"), [
    (("workload.n=0",), "workload.n: must be between 1 and 256, got 0"),
    (("workload.beam_width=257",), "between 1 and 256"),
    (('workload.n={kind="uniform", min=1}',), "a uniform distribution needs an explicit max"),
    (('workload.n={kind="lognormal", mean=3, std=1}',), "min and max must be between 1 and 256"),
    (("workload.n=2", "workload.beam_width=2"), "not both"),
])
def test_bad_outputs_per_request_name_the_field(sets, message):
    with pytest.raises(PerfkitError, match=message):
        load_profile("default", Overrides(sets=sets))
