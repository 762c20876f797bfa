"""Paged KV allocation, replayed with the engine's scheduling rules, event to event.

The rules are those of `engine.scheduler.Scheduler` with no token budget (a prompt
is computed in its admission step) and with the queue uncapped:
- a running request holds cdiv(computed, block_size) blocks; a step that makes it
  cross a block boundary allocates one block;
- running requests are served in admission order; when one needs a block and none
  is free, the newest running request (largest (priority, arrival)) is preempted:
  its blocks are freed and it waits again at its place in the queue, to recompute
  prompt + the tokens it had generated; a step with a preemption admits no one;
- otherwise the queue head is admitted (FCFS, no overtaking) while its blocks fit
  and fewer than max_num_seqs run; it is freed at the end of the step in which it
  stores its last K/V (kv_len, see `types`).
tests/fragmentation check every step's blocks and slots against the Engine's.

Speed. A request admitted at step a with c0 tokens computed crosses a block
boundary at steps t = a + 1 - c0 (mod block_size), so running requests sit in one
bucket per phase and a step between events costs one bucket-size lookup. Events
are admissions, finishes, arrivals and steps whose bucket holds more requests
than there are free blocks. Slot-steps are summed in closed form per request
when it leaves (sum of cdiv(c0 + j, bs) over its steps), not per step.
Cost: O(steps + events x log), steps ~ tokens / concurrency; with one priority the
queue of never-run requests is a FIFO and only preempted ones go through a heap.

Prefix caching shares the full blocks of the workload's shared prefixes
(prefix_len // block_size per group). A group is cached from the step in which
one of its requests is admitted to compute it, so requests admitted later in
that same step already share it (the engine, like vLLM v1, registers a block's
hash when it schedules the block). A released prefix stays
cached and counts as free; the replay evicts it whole, oldest first, only when
no other free block is left. The engine evicts block by block in LRU order
among all hashed blocks, so under eviction pressure the two can differ.
"""

from __future__ import annotations

import heapq
from collections import deque

from perfkit.config.units import cdiv
from perfkit.fragmentation.blocks import PagedState
from perfkit.fragmentation.types import PolicyResult, Trace

NEVER = 1 << 62  # a step no replay reaches


class _PagedReplay(PagedState):
    """The queue, admissions, preemption and the step loop over the pool state."""

    def __init__(self, trace: Trace, num_blocks: int, block_size: int, max_num_seqs: int,
                 prefix_caching: bool, timeline: bool) -> None:
        super().__init__(trace, num_blocks, block_size, prefix_caching, timeline)
        n, self.cap = trace.num_requests, max_num_seqs
        self.key = [trace.order_key(i) for i in range(n)]
        self.fifo = len(set(trace.priority)) <= 1  # then never-run requests queue in order
        self.fresh: deque[int] = deque()  # never-run requests (fifo mode)
        self.retry: list[tuple[int, int]] = []  # heap of (key, request): the rest of the queue
        # Preemption victims, newest (largest key) first. With one priority every admission
        # is the largest key running (a preempted request returns ahead of all newer ones),
        # so a stack in admission order; else a heap of (-key, request). Entries of
        # requests no longer running are skipped when reached.
        self.victim_stack: list[int] = []
        self.victim_heap: list[tuple[int, int]] = []
        self.finish_at: dict[int, list[int]] = {}  # step -> running requests that end in it
        self.preempted_now = False
        self.last_cap = -1  # last step the head waited for a seq slot
        self.finished = self.rejected = self.preempted = self.queued_mem = 0
        self.queued_seqs = self.peak_seqs = 0

    # -- the queue --------------------------------------------------------------------
    def arrive(self, i: int) -> None:
        tr = self.trace
        final = min(tr.prompt_len[i] + tr.max_tokens[i], tr.max_model_len)
        if tr.prompt_len[i] >= tr.max_model_len or cdiv(final, self.bs) > self.nb:
            self.rejected += 1
        elif self.fifo:
            self.fresh.append(i)
        else:
            heapq.heappush(self.retry, (self.key[i], i))
        self.dirty = True

    def admit(self, t: int) -> None:
        """FCFS while the head's blocks fit and fewer than max_num_seqs run."""
        retry, fresh, key, c0, bs = self.retry, self.fresh, self.key, self.c0, self.bs
        while retry or fresh:
            from_retry = bool(retry) and (not fresh or retry[0][0] < key[fresh[0]])
            i = retry[0][1] if from_retry else fresh[0]
            if self.num >= self.cap:
                self.last_cap = t
                break
            need = cdiv(c0[i], bs)
            if self.prefix is not None and self.trace.prefix_group[i] >= 0:
                if not self._admit_shared(i, need, t):
                    break
            elif need > self.free:
                self.last_mem = t
                break
            else:
                self.free -= need
                if self.prefix is not None:
                    self.prefix.evict(self.free)
            if from_retry:
                heapq.heappop(retry)
            else:
                fresh.popleft()
            self._start(i, t)
        self.dirty = False

    def _start(self, i: int, t: int) -> None:
        arrived, c0 = self.trace.arrival_step[i], self.c0[i]
        if c0 == self.trace.prompt_len[i]:  # first admission (a preempted one generated)
            self.queued_mem += self.last_mem >= arrived
            self.queued_seqs += self.last_cap >= arrived
        self.adm[i] = t
        self.running[i] = True
        self.num += 1
        self.base += c0 - t
        self.buckets[(t + 1 - c0) % self.bs][i] = None
        if self.fifo:
            self.victim_stack.append(i)
        else:
            heapq.heappush(self.victim_heap, (-self.key[i], i))
        end = t + self.kv[i] - c0
        if end in self.finish_at:
            self.finish_at[end].append(i)
        else:
            self.finish_at[end] = [i]

    # -- leaving ----------------------------------------------------------------------
    def pressure(self, t: int, due: dict[int, None]) -> None:
        """More requests cross a block boundary than blocks are free: serve them in
        admission order, preempting the newest running request while none is free."""
        if self.fifo:
            self._pressure_fifo(t, due)
        else:
            self._pressure_ordered(t, due)
        if self.prefix is not None:
            self.prefix.evict(self.free)

    def _pressure_fifo(self, t: int, due: dict[int, None]) -> None:
        """With one priority the newest running request is also the last one served, so
        serving in order = preempting newest-first until the due ones that remain fit."""
        need = len(due)
        while need > self.free:
            v = self._pop_victim()
            need -= v in due
            self._preempt(v, cdiv(self.c0[v] + t - 1 - self.adm[v], self.bs), t)
        self.free -= need

    def _pressure_ordered(self, t: int, due: dict[int, None]) -> None:
        """Under priorities the victim may already have its block this step: it frees it."""
        done: set[int] = set()
        running, c0, adm, bs = self.running, self.c0, self.adm, self.bs
        for i in list(due):
            if not running[i]:
                continue
            while self.free < 1:
                v = self._pop_victim()
                self._preempt(v, cdiv(c0[v] + t - 1 - adm[v], bs) + (v in done), t)
                if v == i:
                    break
            if running[i]:
                self.free -= 1
                done.add(i)

    def _preempt(self, v: int, held: int, t: int) -> None:
        """Free v's `held` blocks; it waits again at its place, to recompute its tokens."""
        self.drop(v, held, t)
        end = self.adm[v] + self.kv[v] - self.c0[v]
        ending = self.finish_at[end]
        ending.remove(v)
        if not ending:  # finish_at keeps only steps where a request ends
            del self.finish_at[end]
        self.c0[v] += t - self.adm[v]  # prompt + the tokens it generated
        heapq.heappush(self.retry, (self.key[v], v))
        self.preempted += 1
        self.preempted_now = True

    def _pop_victim(self) -> int:
        running, stack, heap = self.running, self.victim_stack, self.victim_heap
        while True:
            v = stack.pop() if self.fifo else heapq.heappop(heap)[1]
            if running[v]:
                return v

    # -- end of a step ----------------------------------------------------------------
    def finish(self, t: int) -> None:
        """Free the requests that stored their last K/V in step t."""
        for i in self.finish_at.pop(t):
            self.drop(i, cdiv(self.kv[i], self.bs), t)
            self.finished += 1

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> None:
        arrival, n_req = self.trace.arrival_step, self.trace.num_requests
        buckets, bs = self.buckets, self.bs
        retry, fresh, finish_at = self.retry, self.fresh, self.finish_at
        nxt, t = 0, (arrival[0] if n_req else 0)
        while True:
            while nxt < n_req and arrival[nxt] <= t:
                self.arrive(nxt)
                nxt += 1
            if self.num == 0 and not (retry or fresh):
                if nxt >= n_req:
                    return
                t = arrival[nxt]
                continue
            due = buckets[t % bs]
            if len(due) > self.free:
                self.pressure(t, due)
            elif due:
                self.free -= len(due)
                if self.prefix is not None:
                    self.prefix.evict(self.free)
            if self.preempted_now:
                self.preempted_now = False
            elif self.dirty:
                self.admit(t)
            ran = self.num
            if ran:
                self.steps += 1
                if ran > self.peak_seqs:
                    self.peak_seqs = ran
            if t in finish_at:
                self.finish(t)
            if ran and (self.timeline is not None or self.nb - self.free > self.peak_blocks
                        or self.prefix is not None):
                self.observe(t)
            if self.dirty and (retry or fresh) and not self._head_waits(t + 1):
                t += 1  # the head may fit now
            else:
                t = self._span(t, arrival[nxt] if nxt < n_req else NEVER)

    def _head_waits(self, t: int) -> bool:
        """Whether the head surely waits at step t: free blocks only shrink until the next
        event, so if it does not fit now it will not then (prefix hits: don't guess)."""
        if self.prefix is not None:
            return False
        retry, fresh = self.retry, self.fresh
        i = retry[0][1] if retry and (not fresh or retry[0][0] < self.key[fresh[0]]) \
            else fresh[0]
        if self.num >= self.cap:
            self.last_cap = t
        elif cdiv(self.c0[i], self.bs) > self.free:
            self.last_mem = t
        else:
            return False
        self.dirty = False
        return True

    def _span(self, t: int, t_stop: int) -> int:
        """Steps after t without an event but block allocations: walk their buckets.
        Returns the next event step: an arrival (t_stop), a finish, or a bucket larger
        than the free blocks."""
        if not self.num:
            return t_stop if t_stop < NEVER else t + 1
        buckets, bs, free, s, finish_at = self.buckets, self.bs, self.free, t + 1, self.finish_at
        watch = self.timeline is not None
        while s < t_stop and s not in finish_at:
            due = len(buckets[s % bs])
            if due > free:
                break
            free -= due
            if watch:
                self.free = free
                self.observe(s)
            s += 1
        self.free = free
        if s > t + 1:
            self.steps += s - t - 1
            if self.prefix is not None:
                self.prefix.evict(free)
                self.observe(s - 1, to_timeline=False)
            elif self.nb - free > self.peak_blocks:
                self.observe(s - 1, to_timeline=False)
        return s


def simulate_paged(
    trace: Trace, num_blocks: int, block_size: int, max_num_seqs: int,
    prefix_caching: bool = False, name: str | None = None, timeline: bool = False,
) -> PolicyResult:
    """Replay `trace` on a pool of `num_blocks` blocks (see module doc)."""
    if num_blocks < 1 or block_size < 1:
        raise ValueError("a paged pool needs num_blocks >= 1 and block_size >= 1")
    sim = _PagedReplay(trace, num_blocks, block_size, max_num_seqs, prefix_caching, timeline)
    sim.run()
    p = sim.prefix
    return PolicyResult(
        name=name or f"paged-{block_size}" + ("+prefix" if prefix_caching else ""),
        kind="paged", block_size=block_size, pool_slots=num_blocks * block_size,
        num_blocks=num_blocks, num_steps=sim.steps, totals=sim.totals(), peak=sim.peak,
        peak_step=sim.peak_step, free_gap_sum=0.0, free_gap_peak=0.0,
        saved_block_steps=p.sum_saved if p is not None else 0,
        peak_saved_blocks=sim.peak_saved, peak_sequences=sim.peak_seqs,
        num_finished=sim.finished, num_rejected=sim.rejected, num_preempted=sim.preempted,
        num_queued_for_memory=sim.queued_mem, num_queued_for_seqs=sim.queued_seqs,
        timeline=sim.timeline or [],
    )
