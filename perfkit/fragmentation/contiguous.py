"""Contiguous KV allocation (Orca-style): one reservation per request, placed first fit.

Every request reserves one run of slots in a single address space [0, pool)
when it is admitted, and keeps it until it finishes. The reservation is
  reserve-max  max_model_len
  pow2         the next power of two of kv_len (at most max_model_len)
  oracle       exactly kv_len (an oracle that knows the output length)
Placement is first fit over the holes in address order, and a freed run merges
with its neighbours, so external fragmentation is measured, not assumed.

Time model (the same as the paged replay and the engine, without a token
budget): at step t, arrivals up to t join the queue; the queue head is admitted
while its reservation fits and fewer than max_num_seqs run (FCFS, no
overtaking); an admitted request computes its prompt in that step, then one
token per step, and is freed at the end of step `a + kv_len - P` (= a + M - 1). A step is recorded
(after the frees) when a request ran in it. The state changes only at admissions
and finishes, so the replay jumps between those events: cost O(requests x holes).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque
from collections.abc import Callable

from perfkit.fragmentation.types import PolicyResult, Slots, Trace

Reserve = Callable[[int, int], int]  # (kv_len, max_model_len) -> slots reserved


def reserve_max(kv_len: int, max_model_len: int) -> int:
    return max_model_len


def reserve_pow2(kv_len: int, max_model_len: int) -> int:
    return min(1 << (kv_len - 1).bit_length(), max_model_len)


def reserve_exact(kv_len: int, max_model_len: int) -> int:
    return kv_len


class FirstFit:
    """Free holes of [0, size) as sorted starts and their lengths.
    Invariants: holes are disjoint, non-adjacent (merged) and non-empty."""

    def __init__(self, size: int) -> None:
        self.starts = [0] if size else []
        self.lens = [size] if size else []

    def allocate(self, n: int) -> int | None:
        """Start of the first hole (lowest address) that holds n slots, or None."""
        for i, length in enumerate(self.lens):
            if length >= n:
                start = self.starts[i]
                if length == n:
                    del self.starts[i], self.lens[i]
                else:
                    self.starts[i] += n
                    self.lens[i] -= n
                return start
        return None

    def free(self, start: int, n: int) -> None:
        j = bisect_left(self.starts, start)
        if j > 0 and self.starts[j - 1] + self.lens[j - 1] == start:  # merge left
            j -= 1
            self.lens[j] += n
        else:
            self.starts.insert(j, start)
            self.lens.insert(j, n)
        if j + 1 < len(self.starts) and self.starts[j] + self.lens[j] == self.starts[j + 1]:
            self.lens[j] += self.lens.pop(j + 1)  # merge right
            del self.starts[j + 1]

    def unusable(self, n: int) -> tuple[int, int]:
        """(free slots in holes shorter than n, which cannot hold a reservation of n;
        the largest hole)."""
        short = largest = 0
        for length in self.lens:
            if length < n:
                short += length
            if length > largest:
                largest = length
        return short, largest


class _Window:
    """Accumulates recorded steps: slot-steps by kind, the peak, the free-run gap."""

    def __init__(self, pool: int) -> None:
        self.pool = pool
        self.steps = 0
        self.sums = [0, 0, 0, 0, 0]  # used, reserved, internal, external, free
        self.gap_sum = 0.0
        self.peak = Slots(0, 0, 0, 0, pool)
        self.peak_step = -1
        self.peak_gap = 0.0
        self.peak_alloc = -1

    def record(self, t0: int, n: int, base: int, num: int, kv: int, alloc: int,
               ext: int, gap: float) -> None:
        """Steps t0..t0+n-1 with used(t) = base + num * t, kv_len total `kv`, `alloc`
        slots reserved and `ext` unusable free slots (all constant over the span)."""
        used = n * base + num * (n * t0 + n * (n - 1) // 2)
        s = self.sums
        s[0] += used
        s[1] += n * kv - used
        s[2] += n * (alloc - kv)
        s[3] += n * ext
        s[4] += n * (self.pool - alloc - ext)
        self.steps += n
        self.gap_sum += n * gap
        if alloc > self.peak_alloc:
            u = base + num * t0
            self.peak = Slots(u, kv - u, alloc - kv, ext, self.pool - alloc - ext)
            self.peak_alloc, self.peak_step, self.peak_gap = alloc, t0, gap


class _ContiguousReplay:
    def __init__(self, trace: Trace, pool_slots: int, reserve: Reserve, max_num_seqs: int
                 ) -> None:
        n, mml = trace.num_requests, trace.max_model_len
        self.trace, self.pool, self.cap = trace, pool_slots, max_num_seqs
        self.kv = [trace.kv_len(i) for i in range(n)]
        self.size = [reserve(k, mml) for k in self.kv]  # slots reserved per request
        self.space, self.win = FirstFit(pool_slots), _Window(pool_slots)
        self.fifo = len(set(trace.priority)) <= 1  # then the queue is in arrival order
        self.fresh: deque[int] = deque()  # the queue (fifo)
        self.heap: list[tuple[int, int]] = []  # the queue: (order key, request) otherwise
        self.finishing: list[tuple[int, int, int]] = []  # heap of (last step, request, start)
        self.num = self.base = self.kv_sum = self.alloc = 0  # running: count, sum(P - a),
        # sum(kv_len), sum(reserved): used slots at the end of step t = base + num * t
        self.peak_seqs = self.finished = self.rejected = self.queued_mem = 0
        self.queued_seqs = 0
        self.last_mem = self.last_cap = -1  # last step the head waited for memory / a slot
        self.dirty = True  # something changed since the head last failed to fit

    def arrive(self, i: int) -> None:
        tr = self.trace
        if tr.prompt_len[i] >= tr.max_model_len or self.size[i] > self.pool:
            self.rejected += 1
            return
        if self.fifo:
            self.fresh.append(i)
        else:
            heapq.heappush(self.heap, (tr.order_key(i), i))
        self.dirty = True

    def head(self) -> int | None:
        if self.fifo:
            return self.fresh[0] if self.fresh else None
        return self.heap[0][1] if self.heap else None

    def admit(self, t: int) -> None:
        """FCFS: the head is placed first fit, or the queue waits behind it."""
        tr, size, space = self.trace, self.size, self.space
        while (i := self.head()) is not None:
            if self.num >= self.cap:
                self.last_cap = t
                break
            start = space.allocate(size[i])
            if start is None:
                self.last_mem = t
                break
            if self.fifo:
                self.fresh.popleft()
            else:
                heapq.heappop(self.heap)
            self.queued_mem += self.last_mem >= tr.arrival_step[i]
            self.queued_seqs += self.last_cap >= tr.arrival_step[i]
            heapq.heappush(self.finishing, (t + self.kv[i] - tr.prompt_len[i], i, start))
            self.num += 1
            self.base += tr.prompt_len[i] - t
            self.kv_sum += self.kv[i]
            self.alloc += size[i]
        self.dirty = False

    def finish(self, t: int) -> None:
        """Free the reservations of requests that stored their last K/V in step t."""
        fin = self.finishing
        while fin and fin[0][0] == t:
            _, i, start = heapq.heappop(fin)
            self.space.free(start, self.size[i])
            self.num -= 1
            self.base -= self.kv[i] - t  # it ends at t = a + kv_len - P: P - a = kv_len - t
            self.kv_sum -= self.kv[i]
            self.alloc -= self.size[i]
            self.finished += 1
            self.dirty = True

    def record(self, t: int, t_next: int, nxt: int) -> None:
        """Steps t..t_next-1 (just t if nothing runs) share the state after step t.
        External slots are those the next request (queue head, else the next arrival)
        cannot use."""
        head = self.head()
        if head is None and nxt < self.trace.num_requests:
            head = nxt
        ext, largest = self.space.unusable(self.size[head] if head is not None else 0)
        free = self.pool - self.alloc
        gap = 1 - largest / free if free else 0.0
        self.win.record(t, t_next - t if self.num else 1, self.base, self.num, self.kv_sum,
                        self.alloc, ext, gap)

    def run(self) -> None:
        arrival, n_req = self.trace.arrival_step, self.trace.num_requests
        nxt, t = 0, (arrival[0] if n_req else 0)
        while True:
            while nxt < n_req and arrival[nxt] <= t:
                self.arrive(nxt)
                nxt += 1
            if self.dirty:
                self.admit(t)
            if self.num == 0:  # idle: nothing runs and nothing waits
                if nxt >= n_req:
                    return
                t = arrival[nxt]
                continue
            self.peak_seqs = max(self.peak_seqs, self.num)
            self.finish(t)
            if self.dirty and self.head() is not None:
                t_next = t + 1  # the head may fit now
            else:
                t_next = self.finishing[0][0] if self.finishing else t + 1
                if nxt < n_req:
                    t_next = min(t_next, arrival[nxt])
            self.record(t, t_next, nxt)
            t = t_next


def simulate_contiguous(
    trace: Trace, pool_slots: int, reserve: Reserve, max_num_seqs: int, name: str
) -> PolicyResult:
    """Replay `trace` with one contiguous reservation per request (see module doc)."""
    sim = _ContiguousReplay(trace, pool_slots, reserve, max_num_seqs)
    sim.run()
    win = sim.win
    return PolicyResult(
        name=name, kind="contiguous", block_size=None, pool_slots=pool_slots, num_blocks=None,
        num_steps=win.steps, totals=Slots(*win.sums), peak=win.peak, peak_step=win.peak_step,
        free_gap_sum=win.gap_sum, free_gap_peak=win.peak_gap, saved_block_steps=0,
        peak_saved_blocks=0, peak_sequences=sim.peak_seqs, num_finished=sim.finished,
        num_rejected=sim.rejected, num_preempted=0, num_queued_for_memory=sim.queued_mem,
        num_queued_for_seqs=sim.queued_seqs,
    )
