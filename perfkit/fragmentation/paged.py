"""Paged KV allocation by block size: the paged replay's pool accounting, a PolicyResult.

`simulate_paged` runs `replay.paged.run_paged` (the kernel that mirrors the engine's
scheduler, compiled or plain) and reads the pool by waste kind from its scalars. tests/
check its steps' blocks and slots, preemptions and peaks against the real Engine's
(`exact.replay_scheduler`) and tests/replay its decisions, step by step.
"""

from __future__ import annotations

from perfkit.fragmentation.types import PolicyResult, Slots
from perfkit.replay import paged_layout as pl
from perfkit.replay.paged import UNLIMITED, PagedPool, run_paged
from perfkit.replay.trace import Trace


def simulate_paged(
    trace: Trace, num_blocks: int, block_size: int, max_num_seqs: int,
    prefix_caching: bool = False, name: str | None = None, timeline: bool = False,
    max_num_batched_tokens: int = UNLIMITED, full_prompt: bool = True, use_jit: bool = True,
) -> PolicyResult:
    """Replay `trace` on a pool of `num_blocks` blocks (see replay.paged)."""
    pool = PagedPool(num_blocks, block_size, max_num_seqs, max_num_batched_tokens,
                     full_prompt, prefix_caching)
    run = run_paged(trace, pool, timeline, use_jit=use_jit)
    v = run.s
    return PolicyResult(
        name=name or f"paged-{block_size}" + ("+prefix" if prefix_caching else ""),
        kind="paged", block_size=block_size, pool_slots=num_blocks * block_size,
        num_blocks=num_blocks, num_steps=v[pl.STEPS],
        totals=Slots(v[pl.SUM_USED], v[pl.SUM_RES], v[pl.SUM_INT], 0, v[pl.SUM_FREE]),
        peak=Slots(v[pl.PEAK_USED], v[pl.PEAK_RES], v[pl.PEAK_INT], 0, v[pl.PEAK_FREE]),
        peak_step=v[pl.PEAK_STEP], free_gap_sum=0.0, free_gap_peak=0.0,
        saved_block_steps=v[pl.SUM_SAVED], peak_saved_blocks=v[pl.PEAK_SAVED],
        peak_sequences=v[pl.PEAK_SEQS], num_finished=v[pl.FINISHED],
        num_rejected=v[pl.REJECTED], num_preempted=v[pl.PREEMPTED],
        num_queued_for_memory=v[pl.QMEM], num_queued_for_seqs=v[pl.QSEQS],
        num_queued_for_budget=v[pl.QBUDGET], timeline=run.timeline,
    )
