"""Every level draws fresh prompts of the same lengths; repeats of a level the same ones."""

from __future__ import annotations

from perfkit.config.profile import load_profile
from perfkit.result.point import LoadPoint
from perfkit.sweep.plan import plan_from_profile
from perfkit.sweep.runner import level_specs
from perfkit.workload import generate


def _blocks(specs, size: int = 16) -> set[tuple[int, ...]]:
    return {s.prompt[i:i + size] for s in specs for i in range(0, len(s.prompt) - size + 1, size)}


def test_fresh_prompts_per_level_same_lengths() -> None:
    profile = load_profile("default")
    plan = plan_from_profile(profile)
    one, two = (level_specs(profile, plan, LoadPoint(concurrency=c)) for c in (1, 2))
    n = min(len(one), len(two))
    assert [s.prompt_len for s in one[:n]] == [s.prompt_len for s in two[:n]]
    assert [s.max_tokens for s in one[:n]] == [s.max_tokens for s in two[:n]]
    assert not _blocks(one) & _blocks(two)  # no full block of one level recurs in the other
    assert level_specs(profile, plan, LoadPoint(concurrency=1)) == one  # a repeat


def test_shared_prefixes_are_fresh_per_level_too() -> None:
    wl = load_profile("shared-prefix").workload
    a = generate(wl, 512, 512, num_requests=8, salt=":a")
    b = generate(wl, 512, 512, num_requests=8, salt=":b")
    heads = {s.prompt[:wl.shared_prefix.length] for s in a if s.prefix_group is not None}
    assert heads and not heads & {s.prompt[:wl.shared_prefix.length] for s in b}
    assert generate(wl, 512, 512, num_requests=8) == generate(wl, 512, 512, num_requests=8,
                                                             salt="")
