"""Several outputs per request (workload.n, workload.beam_width): what sharing their
blocks saved, or what not sharing them cost. Counts only: contention never withholds them.

With engine.block_sharing on, a request's outputs share their prompt's blocks (and beams
their common past) by reference count; `outputs_share_blocks` reports the blocks saved
and the memory saving (saved / needed without sharing, the PagedAttention paper's
measure). With it off, every fork copies the blocks it would have shared:
`outputs_not_shared` counts those copies and the peak blocks they cost.
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding
from perfkit.summary.evidence import is_remote, set_key, trend

Level = LevelResult


def _outputs_per_request(lv: Level) -> float | None:
    served = lv.counts.requests - lv.counts.num_rejected
    if lv.counts.outputs is None or served <= 0:
        return None
    return lv.counts.outputs / served


def _several(levels: list[Level]) -> list[Level]:
    return [lv for lv in levels if (_outputs_per_request(lv) or 1.0) > 1.0]


def outputs_not_shared(levels: list[Level], profile: Profile) -> list[Finding]:
    """Several outputs per request on an engine told not to share their blocks."""
    several = _several(levels)
    if is_remote(levels) or not several or profile.engine.block_sharing:
        return []
    lv = max(several, key=lambda x: x.counts.pool_copy_on_writes or 0)
    copies = lv.counts.pool_copy_on_writes
    text, values = trend(levels, lambda x: x.counts.pool_copy_on_writes)
    return [Finding(
        "outputs_not_shared", "warning",
        f"Requests ask for {_outputs_per_request(lv):.1f} outputs each and the engine does "
        f"not share their blocks (engine.block_sharing = false): at {lv.point.label} every "
        f"fork copied the blocks it could have shared, {copies} block copies, peak "
        f"{lv.kv.peak_blocks_used}/{lv.kv.blocks_total} blocks. Copies: {text}.",
        {"level": lv.point.label, "copy_on_writes": copies,
         "outputs": lv.counts.outputs, "peak_blocks_used": lv.kv.peak_blocks_used,
         "trend_copy_on_writes": values},
        f"Share them: {set_key(False, 'engine.block_sharing', True)} (the outputs' "
        "tokens stay the same; each shared block is held once until an output writes it).",
    )]


def outputs_share_blocks(levels: list[Level], profile: Profile) -> list[Finding]:
    """Several outputs per request sharing their blocks: what it saved."""
    several = [lv for lv in _several(levels) if lv.kv.memory_saving is not None]
    if is_remote(levels) or not several or not profile.engine.block_sharing:
        return []
    lv = max(several, key=lambda x: x.kv.mean_blocks_saved or 0.0)
    text, values = trend(levels, lambda x: x.kv.memory_saving, lambda v: f"{v:.0%}")
    return [Finding(
        "outputs_share_blocks", "info",
        f"Requests ask for {_outputs_per_request(lv):.1f} outputs each and share their "
        f"blocks: at {lv.point.label} sharing saved {lv.kv.mean_blocks_saved:.1f} blocks "
        f"per step (peak {lv.kv.peak_blocks_saved}), a memory saving of "
        f"{lv.kv.memory_saving:.1%}, for {lv.counts.pool_copy_on_writes} copy-on-writes. "
        f"Saving: {text}.",
        {"level": lv.point.label, "memory_saving": lv.kv.memory_saving,
         "mean_blocks_saved": lv.kv.mean_blocks_saved,
         "peak_blocks_saved": lv.kv.peak_blocks_saved,
         "copy_on_writes": lv.counts.pool_copy_on_writes, "trend_memory_saving": values},
        "Nothing to fix: the saving is what a pool without sharing would need on top "
        f"({set_key(False, 'engine.block_sharing', False)} measures it).",
    )]
