"""Findings only a remote target needs: responses delivered in bursts, prefix hits the
workload did not plan. Rules have the signature `(levels, profile) -> list[Finding]`
(they go into findings.REMOTE_RULES); a None never trips one.

One definition of a prefix hit, in both modes: a prompt token whose KV was found in the
prefix cache when its request was first admitted (re-prefill after a preemption is not a
hit). The level's `prefix_hit_rate` is those tokens over prompt tokens.
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding

# Every level draws fresh prompts, so prefix hits can only come from the workload's shared
# prefixes: at most share x length tokens per request (25% slack for the random draw).
PLANNED_SLACK = 1.25
UNPLANNED_MIN_SHARE = 0.01  # of prompt tokens; below this, chance collisions of blocks


def burst_delivery(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    """More than half of a level's responses arrived at once: its TPOT/ITL mean nothing."""
    bursty = [lv for lv in levels if lv.stream is not None and lv.stream.degenerate]
    if not bursty:
        return []
    first = bursty[0]
    st = first.stream
    assert st is not None and st.burst_share is not None
    return [Finding(
        "burst_delivery", "warning",
        f"At {first.point.label}, {st.burst_share:.0%} of responses arrived in one burst "
        f"(every chunk within {st.burst_span_s * 1e3:g} ms; {st.tokens_per_chunk or 0:.1f} "
        "tokens per chunk): TPOT and ITL there measure delivery, not decoding, and no TPOT "
        "verdict or knee should rest on them.",
        {"levels": [lv.point.label for lv in bursty], "burst_share": st.burst_share,
         "tokens_per_chunk": st.tokens_per_chunk, "itl_unit": st.itl_unit},
        "Judge these levels by TTFT, E2E and tokens/s; for per-token timings give the server "
        "CPU to spare (fewer concurrent requests, or a machine of its own), and check that "
        "it streams one token per chunk (no output buffering in a proxy).",
    )]


def _planned_tokens(lv: LevelResult, profile: Profile) -> float:
    sp = profile.workload.shared_prefix
    if sp.groups == 0 or sp.length == 0:
        return 0.0
    return lv.counts.completed * sp.length * sp.share * PLANNED_SLACK


def unplanned_prefix_hits(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    """The server found more prompt tokens cached than the workload's shared prefixes
    explain: prompts reused across levels or runs, or another client's traffic."""
    for lv in levels:
        counts = lv.counts
        if lv.prefix_hit_rate is None or not counts.prompt_tokens:
            continue
        planned = _planned_tokens(lv, profile)
        if counts.cached_tokens == 0 and lv.prefix_hit_rate > 0:  # only the scraped counter
            hits = lv.prefix_hit_rate * counts.prompt_tokens
        else:
            hits = float(counts.cached_tokens)
        extra = hits - planned
        if extra > UNPLANNED_MIN_SHARE * counts.prompt_tokens:
            return [Finding(
                "unplanned_prefix_hits", "warning",
                f"At {lv.point.label}, {hits / counts.prompt_tokens:.0%} of prompt tokens were "
                f"found in the server's prefix cache, {extra:.0f} tokens more than the "
                "workload's shared prefixes explain: levels are not like for like.",
                {"level": lv.point.label, "prefix_hit_rate": lv.prefix_hit_rate,
                 "hit_tokens": round(hits), "planned_max_tokens": round(planned)},
                "Another client or an earlier run with the same seed left these prompts in "
                "the cache: use a fresh --seed, reset the server's prefix cache (vLLM: POST "
                "/reset_prefix_cache with VLLM_SERVER_DEV_MODE=1; perfkit serve: POST "
                "/reset_prefix_cache), or sweep a server of its own.",
            )]
    return []


REMOTE_ONLY_RULES = [burst_delivery, unplanned_prefix_hits]
