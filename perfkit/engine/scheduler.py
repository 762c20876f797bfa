"""Continuous batching with chunked prefill, priority, admission control, preemption.

The model of a step: there are no prefill or decode phases. Every sequence has
`num_computed_tokens` moving toward `num_tokens`; a step gives each scheduled
sequence some new tokens to compute within the token budget
(max_num_batched_tokens) and the batch cap (max_num_seqs). Running sequences
go first, in admission order; then waiting ones by (priority, arrival). A
sequence whose computation reaches its last token samples a new one.

A block is registered in the prefix cache when it is scheduled to be filled, so a
request admitted later in the same step hits it (as vLLM v1). A waiting request is
admitted only when the blocks of all its tokens fit (`admission = "full_prompt"`,
vLLM's scheduler_reserve_full_isl), or, with "first_chunk", those of its first chunk.

When a running sequence needs a block and none is free, the lowest-priority,
newest running sequence is preempted: its blocks are freed (their hashes stay
in the prefix cache until evicted) and it is recomputed later.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from perfkit.config.units import cdiv
from perfkit.engine.blocks import BlockPool
from perfkit.engine.kv_manager import KVManager
from perfkit.engine.sequence import SeqStatus, Sequence


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    max_waiting: int
    # full_prompt: a waiting request is admitted only when the blocks of its whole prompt
    # fit (vLLM v1's scheduler_reserve_full_isl, its default); first_chunk: only the
    # blocks of this step's chunk
    admission: str = "full_prompt"


@dataclass
class ScheduledSeq:
    seq: Sequence
    num_new_tokens: int  # tokens computed this step, from seq.num_computed_tokens on
    samples: bool  # the step reaches the sequence's last token: sample the next one


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    admitted: list[Sequence] = field(default_factory=list)  # newly running this step
    copies: list[tuple[int, int]] = field(default_factory=list)  # (src, dst) block copies
    budget: int = 0  # tokens still schedulable this step

    @property
    def num_batched_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)


class Scheduler:
    def __init__(self, config: SchedulerConfig, pool: BlockPool) -> None:
        self.config = config
        self.pool = pool
        self.kv = KVManager(pool)
        self.waiting: list[tuple[int, int, Sequence]] = []  # heap of (priority, order, seq)
        self.running: list[Sequence] = []
        self._next_order = 0
        self.num_preemptions = 0

    # -- admission control ------------------------------------------------------------
    def check_admission(self, seq: Sequence) -> str | None:
        """Why this request can never be served (or not now), else None."""
        cfg = self.config
        if seq.num_prompt_tokens >= cfg.max_model_len:
            return "prompt_too_long"
        final = min(seq.num_prompt_tokens + seq.max_tokens, cfg.max_model_len)
        if cdiv(final, self.pool.block_size) > self.pool.num_blocks:
            return "exceeds_kv_pool"
        if len(self.waiting) >= cfg.max_waiting:
            return "queue_full"
        return None

    def add(self, seq: Sequence) -> str | None:
        """Queue a request; returns the rejection reason instead when it is not admitted."""
        reason = self.check_admission(seq)
        if reason is None:
            seq.arrival_order = self._next_order
            self._next_order += 1
            self._push_waiting(seq)
        return reason

    def _push_waiting(self, seq: Sequence) -> None:
        seq.status = SeqStatus.WAITING
        heapq.heappush(self.waiting, (seq.priority, seq.arrival_order, seq))

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # -- one step ---------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput(budget=self.config.max_num_batched_tokens)
        self._schedule_running(out)
        if not out.preempted:
            self._schedule_waiting(out)
        return out

    def _schedule_running(self, out: SchedulerOutput) -> None:
        for seq in list(self.running):
            if out.budget == 0:
                break
            if seq.status is not SeqStatus.RUNNING:  # preempted earlier in this loop
                continue
            num_new = min(seq.num_uncomputed, out.budget)
            copies = self._allocate_or_preempt(seq, num_new, out)
            if copies is None:
                continue
            out.copies.extend(copies)
            out.scheduled.append(ScheduledSeq(seq, num_new, num_new == seq.num_uncomputed))
            out.budget -= num_new

    def _allocate_or_preempt(
        self, seq: Sequence, num_new: int, out: SchedulerOutput
    ) -> list[tuple[int, int]] | None:
        while True:
            copies = self.kv.allocate(seq, num_new)
            if copies is not None:
                return copies
            victim = max(self.running, key=lambda s: (s.priority, s.arrival_order))
            self._preempt(victim, out)
            if victim is seq:
                return None

    def _preempt(self, victim: Sequence, out: SchedulerOutput) -> None:
        for i, item in enumerate(out.scheduled):
            if item.seq is victim:  # already scheduled this step: give its tokens back
                out.budget += item.num_new_tokens
                del out.scheduled[i]
                break
        self.running.remove(victim)
        self.kv.free(victim)
        victim.num_computed_tokens = 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        out.preempted.append(victim)
        self._push_waiting(victim)

    def _schedule_waiting(self, out: SchedulerOutput) -> None:
        while self.waiting and out.budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0][2]
            full = self.config.admission == "full_prompt"
            if not self.kv.admit(seq, out.budget, full):
                break  # head of the queue waits for memory; no overtaking (priority order)
            heapq.heappop(self.waiting)
            num_new = min(seq.num_uncomputed, out.budget)
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
            out.admitted.append(seq)
            out.scheduled.append(ScheduledSeq(seq, num_new, num_new == seq.num_uncomputed))
            out.budget -= num_new

    # -- after the model ran ----------------------------------------------------------
    def commit(self, out: SchedulerOutput) -> None:
        """The step's tokens are computed: advance progress (their full blocks were
        registered in the prefix cache when they were scheduled)."""
        for item in out.scheduled:
            item.seq.num_computed_tokens += item.num_new_tokens

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence (done, cancelled): free its blocks tail first."""
        if seq.status is SeqStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SeqStatus.WAITING:
            self.waiting = [w for w in self.waiting if w[2] is not seq]
            heapq.heapify(self.waiting)
        self.kv.free(seq)
        seq.status = SeqStatus.FINISHED
        seq.finish_reason = reason

    def num_blocks_used(self) -> int:
        return self.pool.num_used_blocks
