"""Continuous batching with chunked prefill, priority, admission control, preemption.

perfkit/replay/paged_step.py (+ paged_schedule.py) is this scheduler compiled over block
counts: a change here is a change there; tests/replay/test_conformance.py ties them.

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

A request with several outputs (engine/group.py) is one unit: it takes its width in
max_num_seqs seats, is preempted whole, and its beams sample only in a step where every
live beam reaches its last token (the step then picks the best W of all candidates).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from perfkit.engine import forks
from perfkit.engine.blocks import BlockPool
from perfkit.engine.group import seats_of
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
        self.num_seats = 0  # max_num_seqs seats the running requests take (group.seats)

    # -- admission control ------------------------------------------------------------
    def check_admission(self, seq: Sequence) -> str | None:
        """Why this request can never be served (or not now), else None."""
        cfg = self.config
        if seq.num_prompt_tokens >= cfg.max_model_len:
            return "prompt_too_long"
        if forks.blocks_at_end(seq, cfg.max_model_len, self.pool.block_size) \
                > self.pool.num_blocks:
            return "exceeds_kv_pool"
        if seq.group is not None and (seq.group.width > cfg.max_num_seqs
                                      or seq.group.width > cfg.max_num_batched_tokens):
            return "too_many_outputs"
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
        beams_done: set[int] = set()  # beam groups scheduled this step, by id
        for seq in list(self.running):
            if out.budget == 0:
                break
            if seq.status is not SeqStatus.RUNNING:  # preempted earlier in this loop
                continue
            group = seq.group
            if group is not None and group.kind == "beam" and group.root is None:
                if id(group) not in beams_done:
                    beams_done.add(id(group))
                    self._schedule_beams(group.members, out)
                continue
            num_new = min(seq.num_uncomputed, out.budget)
            self._schedule_one(seq, num_new, self._samples(seq, num_new), out)

    def _samples(self, seq: Sequence, num_new: int) -> bool:
        """The step reaches seq's last token and samples (a resuming root forks instead)."""
        return num_new == seq.num_uncomputed and not (seq.group is not None
                                                      and seq.group.resuming)

    def _schedule_beams(self, members: list[Sequence], out: SchedulerOutput) -> None:
        """A forked beam group: every live beam samples in this step, or none does (each
        then computes up to, not including, its last token)."""
        all_sample = sum(m.num_uncomputed for m in members) <= out.budget
        for m in list(members):
            num = m.num_uncomputed if all_sample else min(m.num_uncomputed - 1, out.budget)
            if num > 0 and not self._schedule_one(m, num, all_sample, out):
                return  # the group was preempted

    def _schedule_one(self, seq: Sequence, num_new: int, samples: bool,
                      out: SchedulerOutput) -> bool:
        """Slots for seq's next `num_new` tokens (preempting while short); False when seq
        itself was preempted."""
        copies = self._allocate_or_preempt(seq, num_new, out)
        if copies is None:
            return False
        out.copies.extend(copies)
        out.scheduled.append(ScheduledSeq(seq, num_new, samples))
        out.budget -= num_new
        return True

    def _allocate_or_preempt(
        self, seq: Sequence, num_new: int, out: SchedulerOutput
    ) -> list[tuple[int, int]] | None:
        while True:
            copies = self.kv.allocate(seq, num_new)
            if copies is not None:
                return copies
            victim = max(self.running, key=lambda s: (s.priority, s.arrival_order))
            self._preempt(victim, out)
            if seq.status is not SeqStatus.RUNNING:  # seq, or its group, was the victim
                return None

    def _preempt(self, victim: Sequence, out: SchedulerOutput) -> None:
        """Recompute later: free the victim's blocks (a group's: every member's) and
        queue it again at its place."""
        group = victim.group
        if group is not None and group.root is None:  # a forked group: all of it
            for member in group.members:
                self._evict(member, out)
            victim = forks.resume_root(group)
        else:
            self._evict(victim, out)
            victim.num_computed_tokens = 0
        victim.head.num_preemptions += 1
        self.num_preemptions += 1
        out.preempted.append(victim)
        self._push_waiting(victim)

    def _evict(self, seq: Sequence, out: SchedulerOutput) -> None:
        """seq leaves running: this step's tokens go back to the budget, its blocks to
        the pool."""
        for i, item in enumerate(out.scheduled):
            if item.seq is seq:  # already scheduled this step: give its tokens back
                out.budget += item.num_new_tokens
                del out.scheduled[i]
                break
        if out.copies:  # its copies into blocks it gives back are not made
            own = set(seq.block_ids)
            out.copies = [(src, dst) for src, dst in out.copies if dst not in own]
        self.running.remove(seq)
        self.num_seats -= seats_of(seq)
        self.kv.free(seq)
        seq.status = SeqStatus.WAITING

    def _schedule_waiting(self, out: SchedulerOutput) -> None:
        cap = self.config.max_num_seqs
        while self.waiting and out.budget > 0:
            seq = self.waiting[0][2]
            if self.num_seats + seats_of(seq) > cap:
                break  # the batch cap: a group needs a seat for each of its outputs
            full = self.config.admission == "full_prompt"
            if not self.kv.admit(seq, out.budget, full):
                break  # head of the queue waits for memory; no overtaking (priority order)
            heapq.heappop(self.waiting)
            num_new = min(seq.num_uncomputed, out.budget)
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
            self.num_seats += seats_of(seq)
            out.admitted.append(seq)
            out.scheduled.append(ScheduledSeq(seq, num_new, self._samples(seq, num_new)))
            out.budget -= num_new

    # -- after the model ran ----------------------------------------------------------
    def commit(self, out: SchedulerOutput) -> None:
        """The step's tokens are computed: advance progress (their full blocks were
        registered in the prefix cache when they were scheduled). A resuming group's
        root that has computed its prefix forks into the group's members again."""
        for item in out.scheduled:
            seq = item.seq
            seq.num_computed_tokens += item.num_new_tokens
            group = seq.group
            if group is not None and group.resuming and group.root is seq \
                    and not seq.num_uncomputed:
                forks.resume(self, group)

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence (done, cancelled, a dropped beam): free its blocks tail first."""
        if seq.status is SeqStatus.RUNNING:
            self.running.remove(seq)
            self.num_seats -= seats_of(seq)
        elif seq.status is SeqStatus.WAITING:
            self.waiting = [w for w in self.waiting if w[2] is not seq]
            heapq.heapify(self.waiting)
        self.kv.free(seq)
        seq.status = SeqStatus.FINISHED
        seq.finish_reason = reason
