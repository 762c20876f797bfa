"""Types of the fragmentation tool: pool slots by kind, a policy's result (the trace is
replay.trace.Trace).

Waste kinds, in token slots (one slot holds one token's K and V for every layer).
For a request of prompt P and max_tokens M, the engine stores K/V for
`kv_len = min(P + M, max_model_len) - 1` tokens: the last sampled token is never
fed back.

    used      slots holding a token's K/V now (after the step's compute)
    reserved  slots allocated to a request for tokens it WILL store (kv_len - used)
    internal  slots allocated to a request that it will never use
              (contiguous: reservation - kv_len; paged: last block beyond kv_len)
    external  free slots that cannot serve the next request: free space outside
              any run large enough for its reservation (contiguous); 0 for paged
    free      the rest

Invariant: the five kinds sum to the pool, at every step and therefore over time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

KINDS = ("used", "reserved", "internal", "external", "free")

Arrivals = Literal["saturate", "profile", "closed"]  # --arrivals: how a trace is drawn


@dataclass(frozen=True)
class Slots:
    """Token slots by kind. A snapshot sums to the pool; a total over n steps to n x pool."""

    used: int
    reserved: int
    internal: int
    external: int
    free: int

    @property
    def total(self) -> int:
        return self.used + self.reserved + self.internal + self.external + self.free

    @property
    def occupied(self) -> int:
        """Slots allocated to requests: used + reserved + internal."""
        return self.used + self.reserved + self.internal

    def shares(self) -> dict[str, float]:
        """Each kind as a share of the pool; they sum to 1."""
        total = self.total or 1
        return {kind: getattr(self, kind) / total for kind in KINDS}

    @property
    def used_of_occupied(self) -> float:
        """Share of the occupied memory holding token states (PagedAttention Fig. 2)."""
        return self.used / self.occupied if self.occupied else 0.0


EMPTY = Slots(0, 0, 0, 0, 0)


@dataclass
class PolicyResult:
    """One allocation policy replayed over the trace. Counts only (no wall times)."""

    name: str  # "reserve-max", "pow2", "oracle", "paged-16", "paged-16+prefix", ...
    kind: Literal["contiguous", "paged"]
    block_size: int | None  # paged only
    pool_slots: int  # token slots in this policy's pool (its share of the one budget)
    num_blocks: int | None  # paged only
    num_steps: int  # steps that ran at least one request: the averaging window
    totals: Slots  # slot-steps by kind over the window; mean shares = totals.shares()
    peak: Slots  # the state at the first step with the most slots occupied
    peak_step: int
    free_gap_sum: float  # sum over steps of 1 - largest free run / free (0 if none free)
    free_gap_peak: float  # the same at the peak step
    saved_block_steps: int  # block-steps saved by sharing prefix blocks
    peak_saved_blocks: int
    peak_sequences: int  # most requests running in one step
    num_finished: int
    num_rejected: int  # can never fit: prompt >= max_model_len, or larger than the pool
    num_preempted: int  # preemptions (recompute); a request can be preempted many times
    num_queued_for_memory: int  # requests that waited while the queue head did not fit
    num_queued_for_seqs: int  # requests that waited while max_num_seqs were running
    timeline: list[tuple[int, int]] = field(default_factory=list)  # (blocks, slots used)/step
    # requests that waited while a step's token budget was spent (paged replays)
    num_queued_for_budget: int = 0
    # requests with several outputs (the engine replays, fragmentation/exact.py): blocks in
    # more than one table, summed over steps and at most; copies of shared blocks made
    # before a write (None: a replay that does not model them)
    shared_block_steps: int = 0
    peak_shared_blocks: int = 0
    copy_on_writes: int | None = None

    @property
    def mean_free_gap(self) -> float:
        """Time-averaged 1 - largest free run / total free."""
        return self.free_gap_sum / self.num_steps if self.num_steps else 0.0

    @property
    def shared_saving(self) -> float:
        """Time-averaged share of the pool that prefix sharing saved."""
        if not self.num_steps or self.block_size is None:
            return 0.0
        return self.saved_block_steps * self.block_size / (self.num_steps * self.pool_slots)

    @property
    def mean_saved_blocks(self) -> float:
        return self.saved_block_steps / self.num_steps if self.num_steps else 0.0

    @property
    def memory_saving(self) -> float | None:
        """The PagedAttention paper's measure (§6.3, Fig. 15): blocks saved by sharing /
        blocks needed without sharing, over the steps (allocated + saved). None for
        contiguous policies, which cannot share."""
        if self.block_size is None:
            return None
        needed = self.totals.occupied // self.block_size + self.saved_block_steps
        return self.saved_block_steps / needed if needed else 0.0
