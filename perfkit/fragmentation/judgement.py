"""The fragmentation tool's judgement of the replayed policies: the block size to use
(`recommend`: the largest whose waste is within WASTE_TOLERANCE of the least), a verdict
line per policy, and what limited the run at the profile's block size (`limiter`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfkit.fragmentation.types import PolicyResult

if TYPE_CHECKING:
    from perfkit.fragmentation.policies import FragReport

WASTE_TOLERANCE = 0.02  # block sizes within 2 points of the least waste count as tied


@dataclass(frozen=True)
class Recommendation:
    block_size: int | None
    reason: str


def waste_share(result: PolicyResult) -> float:
    """Time-averaged share of the pool allocated or unusable but holding no token."""
    s = result.totals.shares()
    return s["reserved"] + s["internal"] + s["external"]


def recommend(policies: list[PolicyResult],
              tolerance: float = WASTE_TOLERANCE) -> Recommendation:
    """The largest block size whose waste is within `tolerance` of the least waste:
    larger blocks mean shorter block tables and better kernel efficiency (the
    PagedAttention paper found 16-128 best on ShareGPT), smaller ones less tail waste."""
    paged = [p for p in policies if p.kind == "paged" and not p.name.endswith("+prefix")]
    if not paged:
        return Recommendation(None, "no paged block size was replayed")
    least = min(waste_share(p) for p in paged)
    tied = [p for p in paged if waste_share(p) <= least + tolerance]
    best = max(tied, key=lambda p: p.block_size or 0)
    larger = [p for p in paged if (p.block_size or 0) > (best.block_size or 0)]
    reason = (f"block {best.block_size} wastes {waste_share(best):.1%} of the pool, within "
              f"{tolerance:.0%} of the least ({least:.1%}); larger blocks mean shorter block "
              "tables and more efficient attention kernels")
    if larger:
        nxt = min(larger, key=lambda p: p.block_size or 0)
        reason += f", but block {nxt.block_size} would waste {waste_share(nxt):.1%}"
    if best.num_preempted:
        reason += f" ({best.num_preempted:,} preemptions at block {best.block_size})"
    return Recommendation(best.block_size, reason)


_KIND_MEANING: dict[str, Callable[[PolicyResult], str]] = {
    "reserved": lambda p: "held for tokens not generated yet",
    "internal": lambda p: ("reserved beyond the final length, never used"
                           if p.kind == "contiguous" else "last-block tails never used"),
    "external": lambda p: "free, but in holes too small for the next request",
}


def verdict(p: PolicyResult) -> str:
    """One line: how much of the occupied memory holds tokens, and the largest waste."""
    shares = p.totals.shares()
    kind = max(("reserved", "internal", "external"), key=lambda k: shares[k])
    line = (f"{p.totals.used_of_occupied:.1%} of occupied memory holds tokens; "
            f"largest waste: {kind} {shares[kind]:.1%} of the pool "
            f"({_KIND_MEANING[kind](p)}); at most {p.peak_sequences} running")
    if p.num_preempted:
        per = p.num_preempted / max(p.num_finished, 1)
        line += f", {p.num_preempted:,} preemptions ({per:.1f} per request)"
    if p.saved_block_steps:
        line += f", sharing blocks saves {p.shared_saving:.1%} of the pool"
    return line


def profile_policy(rep: FragReport) -> PolicyResult:
    """The paged replay at the profile's block size: without prefix caching, or with it
    when --block-sizes leaves that size out (that replay always runs: see _jobs)."""
    bs = rep.profile.engine.block_size
    by_name = {x.name: x for x in rep.policies}
    return by_name.get(f"paged-{bs}") or by_name[f"paged-{bs}+prefix"]


def limiter(rep: FragReport) -> tuple[str, str]:
    """What bounded the run at the profile's block size: ("memory" | "batch cap" |
    "token budget" | "load", a sentence). With the batch cap or the budget binding, the
    pool never fills and the shares above say little about fragmentation: the sentence
    says what to change."""
    cap = rep.profile.engine.max_num_seqs
    p = profile_policy(rep)
    name = p.name
    occupied = p.peak.occupied / p.pool_slots if p.pool_slots else 0.0
    if p.num_preempted or p.num_queued_for_memory:
        return "memory", (f"memory limits {name}: {p.num_preempted:,} preemptions, "
                          f"{p.num_queued_for_memory:,} requests queued for blocks")
    if p.peak_sequences >= cap:
        return "batch cap", (
            f"the batch cap (max_num_seqs {cap}), not memory, limits {name}: at most "
            f"{occupied:.1%} of its pool was occupied; raise max_num_seqs or lower the KV "
            "budget (--kv-memory) to see fragmentation under memory pressure")
    if p.num_queued_for_budget:
        budget = rep.profile.engine.max_num_batched_tokens
        return "token budget", (
            f"the token budget (max_num_batched_tokens {budget}), not memory, limits "
            f"{name}: {p.num_queued_for_budget:,} requests waited for it, at most "
            f"{p.peak_sequences} running, {occupied:.1%} of the pool occupied; raise "
            "max_num_batched_tokens to admit more at once")
    return "load", (f"neither memory nor the batch cap limits {name}: at most "
                    f"{p.peak_sequences} running, {occupied:.1%} of the pool occupied")
