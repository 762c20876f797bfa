"""Prefix caching judged by what it would save and what it measurably hit.

The saving a workload offers: the share of prompt tokens that sit in full blocks of a
shared prefix (only full blocks are hashed and reused), i.e.
share x floor(length / block_size) x block_size / mean prompt tokens, measured prompt
length. A rule speaks only when that saving is worth having (>= SAVING_MIN).
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding
from perfkit.summary.evidence import is_remote, mean_of, set_key, trend

SAVING_MIN = 0.10  # share of prompt tokens a cache would skip
HIT_SHARE_MIN = 0.5  # measured hit rate / the saving on offer

Level = LevelResult


def _mean_prompt(levels: list[Level]) -> float | None:
    return mean_of(levels, lambda lv: lv.counts.prompt_tokens / lv.counts.completed
                   if lv.counts.completed else None)


def saving(profile: Profile, block_size: int, mean_prompt: float) -> float:
    sp = profile.workload.shared_prefix
    if sp.groups == 0 or sp.share == 0 or mean_prompt <= 0:
        return 0.0
    cached = (sp.length // block_size) * block_size
    return min(sp.share * cached / mean_prompt, 1.0)


def _pow2_at_most(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def prefix_caching(levels: list[Level], profile: Profile) -> list[Finding]:
    mean_prompt = _mean_prompt(levels)
    sp, eng = profile.workload.shared_prefix, profile.engine
    if mean_prompt is None or sp.groups == 0 or sp.share == 0 or sp.length == 0:
        return []
    remote = is_remote(levels)
    bs = eng.block_size
    offer = saving(profile, bs, mean_prompt)
    text, values = trend(levels, lambda lv: lv.prefix_hit_rate, lambda v: f"{v:.0%}")
    measured = mean_of(levels, lambda lv: lv.prefix_hit_rate)
    evidence = {"shared_prefix_length": sp.length, "share": sp.share, "block_size": bs,
                "mean_prompt_tokens": mean_prompt, "saving_on_offer": offer,
                "measured_hit_rate": measured, "trend_hit_rate": values}
    if sp.length < bs:
        smaller = _pow2_at_most(sp.length)
        could = saving(profile, smaller, mean_prompt)
        if could < SAVING_MIN:
            return []
        turn_on = "" if eng.prefix_caching or remote else \
            " and " + set_key(False, "engine.prefix_caching", True)
        return [Finding(
            "prefix_below_block", "warning",
            f"The shared prefix ({sp.length} tokens) is shorter than one block ({bs}): "
            f"only full blocks are cached, so it is never reused (hit rate: "
            f"{text or 'n/a'}); with blocks of {smaller} it would save {could:.0%} of "
            "prompt tokens.",
            evidence | {"saving_with_smaller_block": could},
            f"Use a block size <= {sp.length}: {set_key(remote, 'engine.block_size', smaller)}"
            f"{turn_on}; or a longer shared prefix.")]
    if offer < SAVING_MIN:
        return []
    if not eng.prefix_caching and not remote:
        return [Finding(
            "prefix_caching_off", "warning",
            f"{sp.share:.0%} of requests share one of {sp.groups} prefixes of {sp.length} "
            f"tokens but prefix caching is off: it would skip {offer:.0%} of prompt tokens "
            f"(prefill) at every level (measured hit rate: {text or 'n/a'}).",
            evidence,
            f"Turn it on: {set_key(False, 'engine.prefix_caching', True)}.")]
    if measured is None or measured >= HIT_SHARE_MIN * offer:
        return []
    evictions = sum(lv.counts.pool_evictions or 0 for lv in levels)
    why = (f"{evictions} cached blocks were evicted: the pool is too small to keep them"
           if evictions else "the server may not cache prefixes" if remote
           else "the prefixes were not found in the pool")
    fix = (set_key(True, "engine.prefix_caching", True) + " (and a block size <= the prefix)"
           if remote else
           set_key(False, "engine.num_blocks", 2 * (levels[0].kv.blocks_total or 0))
           + " so cached prefixes survive")
    return [Finding(
        "prefix_cache_misses", "warning",
        f"Prefix caching hits {measured:.0%} of prompt tokens where the workload offers "
        f"{offer:.0%}: {why}. Hit rate: {text}.",
        evidence | {"evictions": evictions}, f"{fix}.")]
