"""`perfkit bench --only sampler`: the sampler's cost per step for each configuration, and
the step benchmark's sampler and guard shares."""

from __future__ import annotations

from perfkit.bench.sampler import CONFIGS, bench_sampler
from perfkit.config.profile import Overrides, load_profile


def test_sampler_bench_reports_every_configuration() -> None:
    prof = load_profile("default", Overrides(sets=("engine.max_num_seqs=4",)))
    out = bench_sampler(prof, steps=2, rounds=1)
    assert out["batch"] == 4 and out["vocab"] == 512
    for name in CONFIGS:
        assert out[f"us_per_step_{name}"] > 0
