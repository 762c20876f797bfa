"""Rules that name the configuration cause: KV pool, batch cap, token budget, tool-call
guard, block size. They read counts (deterministic), so contention never withholds them.
"""

from __future__ import annotations

import math

from perfkit.config.schema import Profile
from perfkit.result.level import KvSection, LevelResult
from perfkit.result.sweep import Finding
from perfkit.summary.evidence import is_remote, set_key, trend

KV_FULL_SHARE = 0.95  # pool share counted as "full"
CAP_PINNED_SHARE = 0.3  # steps with running at the cap and a queue behind it
CHUNKS_PER_PREFILL_MAX = 2.0  # mean prefill steps per prompt at the lowest load
BUDGET_FULL_SHARE = 0.9  # tokens per step / max_num_batched_tokens
SLOT_FILL_MIN = 0.75  # token slots used / slots in used blocks

Level = LevelResult


def _of(value: int | None) -> str:
    return "an unknown number of" if value is None else str(value)


def _kv_full(kv: KvSection) -> bool:
    return kv.usage_peak is not None and kv.usage_peak >= KV_FULL_SHARE


def _kv_peak(kv: KvSection) -> str:
    if kv.peak_blocks_used is None or kv.blocks_total is None:
        peak = kv.usage_peak
        return "peak KV usage " + ("unknown" if peak is None else f"{peak:.0%}")
    return f"peak {kv.peak_blocks_used}/{kv.blocks_total} blocks"


def kv_pressure(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        kv, pre = lv.kv, lv.counts.preemptions
        if (pre or 0) > 0 or (_kv_full(kv) and (kv.peak_waiting or 0) > 0):
            text, values = trend(levels, lambda x: x.counts.preemptions)
            remote = is_remote(levels)
            more = (set_key(False, "engine.num_blocks", 2 * kv.blocks_total)
                    + " (or a larger engine.kv_memory)" if kv.blocks_total and not remote
                    else "the server's --gpu-memory-utilization (higher) or "
                         "--num-gpu-blocks-override N (vLLM)" if remote
                    else "more blocks (engine.num_blocks / engine.kv_memory)")
            return [Finding(
                "kv_pressure", "warning",
                f"KV cache pressure from {lv.point.label}: {_of(pre)} preemptions, "
                f"{_kv_peak(kv)}, up to {_of(kv.peak_waiting)} requests waiting. "
                f"Preemptions: {text or 'not measured'}.",
                {"level": lv.point.label, "preemptions": pre,
                 "peak_blocks_used": kv.peak_blocks_used, "blocks_total": kv.blocks_total,
                 "usage_peak": kv.usage_peak, "trend_preemptions": values},
                f"Give the pool more blocks: {more}; or admit fewer sequences at once ("
                + set_key(remote, "engine.max_num_seqs",
                          max(1, profile.engine.max_num_seqs // 2)) + ").",
            )]
    return []


def _pinned_share(kv: KvSection, cap: int) -> float:
    tl = kv.timeline
    if not tl.running:
        return 0.0
    pinned = sum(1 for r, w in zip(tl.running, tl.waiting) if r >= cap and w > 0)
    return pinned / len(tl.running)


def batch_cap(levels: list[Level], profile: Profile) -> list[Finding]:
    """In-process: running pinned at engine.max_num_seqs with requests waiting."""
    if is_remote(levels):
        return []
    cap = profile.engine.max_num_seqs
    for lv in levels:
        share = _pinned_share(lv.kv, cap)
        if share < CAP_PINNED_SHARE:
            continue
        text, values = trend(levels, lambda x: x.kv.peak_waiting)
        headroom = not _kv_full(lv.kv)
        new_cap = min(cap * 2, max(x.concurrency or cap for x in levels))
        return [Finding(
            "batch_cap", "warning",
            f"The batch cap limits {lv.point.label}: {cap} sequences running "
            f"(engine.max_num_seqs) with a queue behind them in {share:.0%} of the steps; "
            f"KV {_kv_peak(lv.kv)}. Peak waiting: {text}.",
            {"level": lv.point.label, "max_num_seqs": cap, "pinned_step_share": share,
             "peak_waiting": lv.kv.peak_waiting, "usage_peak": lv.kv.usage_peak,
             "trend_peak_waiting": values},
            (f"Raise the cap: {set_key(False, 'engine.max_num_seqs', max(new_cap, cap + 1))}"
             " (the pool has room for more sequences)." if headroom else
             "The pool is full too: raise engine.max_num_seqs together with "
             "engine.num_blocks, or keep the concurrency at the cap."),
        )]
    return []


def token_budget(levels: list[Level], profile: Profile) -> list[Finding]:
    """In-process: prompts chunked into many steps, or steps full of tokens."""
    if is_remote(levels) or not levels:
        return []
    budget = profile.engine.max_num_batched_tokens
    first = min(levels, key=lambda x: x.point.x)
    prompts = [r.prompt_tokens - r.cached_tokens for r in first.requests
               if not r.warmup and r.rejected is None]
    chunks = sum(math.ceil(max(p, 1) / budget) for p in prompts) / len(prompts) if prompts \
        else 0.0
    full = [lv for lv in levels if lv.counts.steps and lv.counts.batched_tokens is not None
            and lv.counts.batched_tokens / lv.counts.steps >= BUDGET_FULL_SHARE * budget]
    if chunks < CHUNKS_PER_PREFILL_MAX and not full:
        return []
    ttft, tpot = first.latency.ttft.p50, first.latency.tpot.p50
    at = full[0] if chunks < CHUNKS_PER_PREFILL_MAX else first
    text, values = trend(levels, lambda x: None if not x.counts.steps or
                         x.counts.batched_tokens is None else
                         x.counts.batched_tokens / x.counts.steps, lambda v: f"{v:.0f}")
    longest = max(prompts, default=budget)
    new_budget = max(2 * budget, 1 << max(longest - 1, 1).bit_length())
    inflated = ("" if ttft is None or tpot is None else
                f"; TTFT p50 {ttft * 1e3:.1f} ms is {ttft / tpot:.0f}x TPOT p50"
                if tpot > 0 else f"; TTFT p50 {ttft * 1e3:.1f} ms")
    return [Finding(
        "token_budget", "warning",
        f"The token budget limits {at.point.label}: engine.max_num_batched_tokens = {budget}"
        f" splits each prefill into {chunks:.1f} steps on average{inflated}. "
        f"Tokens per step: {text}.",
        {"level": at.point.label, "max_num_batched_tokens": budget,
         "chunks_per_prefill": chunks, "ttft_p50_s": ttft, "tpot_p50_s": tpot,
         "trend_tokens_per_step": values},
        f"Raise the budget: {set_key(False, 'engine.max_num_batched_tokens', new_budget)} "
        "(a prompt then prefills in one step).",
    )]


def guard_off(levels: list[Level], profile: Profile) -> list[Finding]:
    bad = [lv for lv in levels if lv.guard is not None and lv.guard.counts.invalid_tool_calls]
    if not bad:
        return []
    lv = bad[0]
    assert lv.guard is not None
    counts = lv.guard.counts
    text, values = trend(levels, lambda x: None if x.guard is None else
                         x.guard.counts.invalid_tool_calls)
    if profile.engine.guard:
        return [Finding(
            "invalid_tool_calls", "warning",
            f"{counts.invalid_tool_calls} of {counts.tool_calls} tool calls invalid at "
            f"{lv.point.label} although the guard is on. Invalid: {text}.",
            {"level": lv.point.label, "invalid": counts.invalid_tool_calls,
             "tool_calls": counts.tool_calls, "trend": values},
            "This is a guard bug: report it with the profile and seed.")]
    return [Finding(
        "invalid_tool_calls", "warning",
        f"{counts.invalid_tool_calls} of {counts.tool_calls} tool calls invalid from "
        f"{lv.point.label}: the tool-call guard is off (engine.guard = false). "
        f"Invalid: {text}.",
        {"level": lv.point.label, "invalid": counts.invalid_tool_calls,
         "tool_calls": counts.tool_calls, "guard": False, "trend": values},
        f"Turn the guard on: {set_key(False, 'engine.guard', True)} (its FSM mask makes "
        "every tool call valid).")]


def internal_fragmentation(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        kv = lv.kv
        if kv.mean_blocks_used is None or kv.block_size is None or kv.mean_slots_used is None:
            continue
        held = kv.mean_blocks_used * kv.block_size
        if held > 0 and kv.mean_slots_used / held < SLOT_FILL_MIN:
            fill = kv.mean_slots_used / held
            text, values = trend(levels, lambda x: _fill(x.kv), lambda v: f"{v:.0%}")
            smaller = set_key(is_remote(levels), "engine.block_size", max(1, kv.block_size // 4))
            return [Finding(
                "internal_fragmentation", "warning",
                f"Heavy internal fragmentation from {lv.point.label}: only {fill:.0%} of the "
                f"slots in used blocks hold tokens (block size {kv.block_size}). "
                f"Slot fill: {text}.",
                {"level": lv.point.label, "slot_fill": fill, "block_size": kv.block_size,
                 "trend_slot_fill": values},
                f"Use a smaller block size: {smaller}"
                "; `perfkit fragmentation` compares them.",
            )]
    return []


def _fill(kv: KvSection) -> float | None:
    if kv.mean_blocks_used is None or kv.block_size is None or kv.mean_slots_used is None:
        return None
    held = kv.mean_blocks_used * kv.block_size
    return kv.mean_slots_used / held if held > 0 else None
