"""The paged replay's pool state: block counts, shared prefixes, closed-form sums.

`frag_paged` sums slot-steps per request when it leaves instead of per step;
`block_steps` is that sum for blocks. `PrefixCache` tracks the workload's shared
prefixes: which are cached, how many running requests share each, what sharing
saves, and which released prefixes to evict first. `PagedState` holds the
per-request counts the scheduling rules in `frag_paged` move (see there for the model).
"""

from __future__ import annotations

from collections import OrderedDict

from perfkit.config.units import cdiv
from perfkit.fragmentation.types import Slots, Trace


def block_steps(c0: int, steps: int, bs: int) -> int:
    """sum of cdiv(c0 + j, bs) for j in [0, steps): blocks held, summed over steps.

    With T(x) = sum of cdiv(y, bs) for y in 1..x = bs*q*(q+1)/2 + r*(q+1), x = q*bs + r,
    the sum is T(c0 + steps - 1) - T(c0 - 1)."""
    q1, r1 = divmod(c0 + steps - 1, bs)
    q0, r0 = divmod(c0 - 1, bs)
    return (bs * (q1 * (q1 + 1) - q0 * (q0 + 1)) // 2) + r1 * (q1 + 1) - r0 * (q0 + 1)


class PrefixCache:
    """Each group's prefix is `shared` full blocks, cached or not, shared by `ref[g]`
    running requests. Invariants: a cached group has ref >= 1 or sits in `lru`
    (released: its blocks count as free); `cached_free` = shared x len(lru)."""

    def __init__(self, num_groups: int, shared: int) -> None:
        self.shared = shared  # blocks per prefix: prefix_len // block_size
        self.ref = [0] * num_groups
        self.cached = [False] * num_groups
        self.since = [0] * num_groups  # step from which the group's blocks are referenced
        self.lru: OrderedDict[int, None] = OrderedDict()  # released prefixes, oldest first
        self.cached_free = 0  # blocks in released prefixes
        self.saved = 0  # blocks saved now: sum over groups of (ref - 1) * shared
        self.saved_since = 0  # step from which `saved` holds
        self.sum_saved = 0  # block-steps saved, over recorded steps
        self.sum_blocks = 0  # block-steps held by referenced prefixes

    def cost(self, g: int) -> tuple[bool, int]:
        """(hit, blocks revived) for a request of group g admitted now."""
        if not self.cached[g]:
            return False, 0
        return True, self.shared if self.ref[g] == 0 else 0

    def _saved_change(self, delta: int, t: int) -> None:
        self.sum_saved += self.saved * (t - self.saved_since)
        self.saved, self.saved_since = self.saved + delta, t

    def take(self, g: int, t: int) -> int:
        """A request shares group g's prefix from step t on (a hit, or the first to
        compute it). Returns the free blocks this uses (a revived prefix)."""
        revived = 0
        if self.ref[g] == 0:
            if g in self.lru:
                del self.lru[g]
                self.cached_free -= self.shared
                revived = self.shared
            self.since[g] = t
        else:
            self._saved_change(self.shared, t)
        self.ref[g] += 1
        self.cached[g] = True
        return revived

    def release(self, g: int, t: int) -> int:
        """A sharing request leaves at step t. Returns the blocks that become free."""
        self.ref[g] -= 1
        if self.ref[g] >= 1:
            self._saved_change(-self.shared, t)
            return 0
        self.sum_blocks += self.shared * (t - self.since[g])
        self.lru[g] = None  # stays cached, free, until evicted
        self.cached_free += self.shared
        return self.shared

    def evict(self, free: int) -> None:
        """Keep released prefixes within the free blocks, dropping the oldest first."""
        while free < self.cached_free:
            g, _ = self.lru.popitem(last=False)
            self.cached[g] = False
            self.cached_free -= self.shared


class PagedState:
    """Per-request block counts of the paged replay and its closed-form sums.

    A running request i was admitted at step adm[i] with c0[i] tokens computed; at the
    end of step t it has c0 + t - adm computed and cdiv(that, bs) blocks in its table,
    hit[i] of them a shared prefix it does not own. `drop` adds its slot-steps over
    adm..t-1 when it leaves; `snapshot` reads the pool at one step; `_admit_shared`
    and `drop` move requests of a shared-prefix group on and off the PrefixCache."""

    def __init__(self, trace: Trace, num_blocks: int, block_size: int, prefix_caching: bool,
                 timeline: bool) -> None:
        n, bs = trace.num_requests, block_size
        self.trace, self.bs, self.nb = trace, bs, num_blocks
        self.kv = [trace.kv_len(i) for i in range(n)]
        self.c0 = list(trace.prompt_len)  # tokens computed in the admission step
        self.adm = [0] * n  # admission step
        self.running = [False] * n
        self.hit = [0] * n  # blocks of a cached prefix the request shares (not its own)
        self.buckets: list[dict[int, None]] = [{} for _ in range(bs)]  # running, by phase
        self.free = num_blocks  # free blocks, released cached prefixes included
        self.num = 0  # running requests
        self.base = 0  # sum over running of (c0 - a): tokens computed at t = base + num*t
        self.sum_tokens = self.sum_blocks = self.sum_internal = 0  # over recorded steps
        groups, shared = max(trace.prefix_group, default=-1) + 1, trace.prefix_len // bs
        self.prefix = PrefixCache(groups, shared) if prefix_caching and groups and shared \
            else None
        self.dirty = True  # memory or a seq slot freed, or an arrival, since the head waited
        self.last_mem = -1  # last step the queue head waited for memory
        self.steps = 0  # recorded steps: a request ran
        self.peak, self.peak_step, self.peak_blocks = Slots(0, 0, 0, 0, 0), -1, -1
        self.peak_saved = 0
        self.timeline: list[tuple[int, int]] | None = [] if timeline else None

    # -- shared prefixes ----------------------------------------------------------------
    def _admit_shared(self, i: int, need: int, t: int) -> bool:
        """Admission of a request with a shared prefix: hit it if cached, else compute
        it, registered at once (as the engine registers blocks when it schedules them:
        requests admitted later in the same step hit them). False if it does not fit."""
        prefix, g = self.prefix, self.trace.prefix_group[i]
        assert prefix is not None
        hit, revive = prefix.cost(g)
        need -= prefix.shared if hit else 0
        if need + revive > self.free:
            self.last_mem = t
            return False
        self.free -= prefix.take(g, t) + need
        self.hit[i] = prefix.shared
        prefix.evict(self.free)
        return True

    def _t_last(self, i: int) -> tuple[int, int]:
        """(step its last block is allocated, internal slots of that block)."""
        bs, kv = self.bs, self.kv[i]
        last = cdiv(kv, bs)
        return self.adm[i] + max(0, (last - 1) * bs + 1 - self.c0[i]), last * bs - kv

    def drop(self, i: int, held: int, t: int) -> None:
        """Request i leaves at step t (finish or preemption) holding `held` table blocks;
        it was recorded over steps adm..t-1: add its slot-steps in closed form."""
        c0, a, h, bs = self.c0[i], self.adm[i], self.hit[i], self.bs
        span = t - a
        if span:
            self.sum_tokens += span * c0 + span * (span - 1) // 2
            q1, r1 = divmod(c0 + span - 1, bs)  # block_steps(c0, span, bs), inlined (hot)
            q0, r0 = divmod(c0 - 1, bs)
            self.sum_blocks += (bs * (q1 * (q1 + 1) - q0 * (q0 + 1)) // 2 + r1 * (q1 + 1)
                                - r0 * (q0 + 1) - span * h)
            kv = self.kv[i]
            last = cdiv(kv, bs)  # blocks at the end; internal slots from when it exists
            t_last = a + (last - 1) * bs + 1 - c0
            if t_last < a:
                t_last = a
            if t > t_last:
                self.sum_internal += (last * bs - kv) * (t - t_last)
        self.free += held - h
        if h and self.prefix is not None:
            self.free += self.prefix.release(self.trace.prefix_group[i], t)
            self.hit[i] = 0
        self.num -= 1
        self.base -= c0 - a
        self.running[i] = False
        del self.buckets[(a + 1 - c0) % bs][i]
        self.dirty = True

    def observe(self, t: int, to_timeline: bool = True) -> None:
        """Step t ended with requests recorded: a peak candidate, a timeline row."""
        used_blocks = self.nb - self.free
        if used_blocks > self.peak_blocks:
            self.peak, self.peak_step, self.peak_blocks = self.snapshot(t), t, used_blocks
        if self.prefix is None:
            saved = 0
        else:
            saved = self.prefix.saved
            self.peak_saved = max(self.peak_saved, saved)
        if self.timeline is not None and to_timeline:
            self.timeline.append((used_blocks, self.base + self.num * t - saved * self.bs))

    def snapshot(self, t: int) -> Slots:
        """The pool at the end of step t; O(running) for the internal slots."""
        internal = 0
        for bucket in self.buckets:
            for i in bucket:
                t_last, waste = self._t_last(i)
                internal += waste if t >= t_last else 0
        saved = self.prefix.saved if self.prefix is not None else 0
        bs, used_blocks = self.bs, self.nb - self.free
        used = self.base + self.num * t - saved * bs
        return Slots(used, used_blocks * bs - used - internal, internal, 0, self.free * bs)

    def totals(self) -> Slots:
        """Slot-steps by kind over the recorded steps."""
        bs, p = self.bs, self.prefix
        used = self.sum_tokens - (p.sum_saved * bs if p is not None else 0)
        blocks = self.sum_blocks + (p.sum_blocks if p is not None else 0)
        return Slots(used, blocks * bs - used - self.sum_internal, self.sum_internal, 0,
                     (self.steps * self.nb - blocks) * bs)

