"""BlockPool's lazy LRU queue against a reference pool with an exact LRU (an OrderedDict,
the pool's earlier structure) that has no batched calls: any program of pool calls hands
out the same blocks, keeps the same ref counts, hashes, free lists (in order) and counters,
and allocate_many / cache_many do exactly what the same single calls in sequence do."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.engine.blocks import BlockHash, BlockPool, NoFreeBlocks, PoolCounters, hash_block

NUM_BLOCKS = 5  # small: the queue's stale-entry rebuild (past 2 * NUM_BLOCKS) runs often
HASHES = [hash_block(None, [i]) for i in range(4)]  # few hashes: duplicates and hits


class ReferencePool:
    """Free blocks: an unhashed stack, then hashed ones in exact LRU order (OrderedDict)."""

    def __init__(self, num_blocks: int) -> None:
        self.ref_count = [0] * num_blocks
        self.block_hash: list[BlockHash | None] = [None] * num_blocks
        self.cached: dict[BlockHash, int] = {}
        self.fresh = list(range(num_blocks - 1, -1, -1))
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.counters = PoolCounters()

    def allocate(self) -> int:
        if self.fresh:
            block = self.fresh.pop()
        else:
            block = self.lru.popitem(last=False)[0]
            del self.cached[self.block_hash[block]]  # type: ignore[arg-type]
            self.block_hash[block] = None
            self.counters.evictions += 1
        self.ref_count[block] = 1
        self.counters.allocations += 1
        return block

    def allocate_many(self, num_blocks: int) -> list[int]:
        if num_blocks > len(self.fresh) + len(self.lru):
            raise NoFreeBlocks("short")
        return [self.allocate() for _ in range(num_blocks)]

    def free(self, blocks: list[int]) -> None:
        for block in blocks:
            self.ref_count[block] -= 1
            if self.ref_count[block] == 0:
                self.counters.frees += 1
                if self.block_hash[block] is None:
                    self.fresh.append(block)
                else:
                    self.lru[block] = None

    def touch(self, block: int) -> None:
        if self.ref_count[block] == 0:
            del self.lru[block]
        self.ref_count[block] += 1

    def cache(self, block: int, h: BlockHash) -> None:
        if self.block_hash[block] is None and h not in self.cached:
            self.block_hash[block] = h
            self.cached[h] = block

    def cache_many(self, blocks: list[int], hashes: list[BlockHash]) -> None:
        for block, h in zip(blocks, hashes, strict=True):
            self.cache(block, h)

    def uncache(self, block: int) -> None:
        h = self.block_hash[block]
        if h is not None and self.cached.get(h) == block:
            del self.cached[h]
        self.block_hash[block] = None

    def reset_prefix_cache(self) -> bool:
        if any(self.ref_count):
            return False
        for block in self.lru:
            self.block_hash[block] = None
            self.fresh.append(block)
        self.lru.clear()
        self.cached.clear()
        return True


# (op, argument): which table / which hash; tables are the block lists callers hold
OPS = ["alloc", "alloc_many", "free", "cache", "cache_many", "hit", "uncache", "reset"]
ops = st.lists(st.tuples(st.sampled_from(OPS),
                         st.integers(0, 3), st.integers(0, len(HASHES) - 1)), max_size=80)


def apply(pool: BlockPool | ReferencePool, tables: list[list[int]], op: str, t: int,
          k: int) -> object:
    """One call on `pool`, from table `t` or with hash `k`; returns what the call returned."""
    table = tables[t]
    free = len(pool.fresh) + len(pool.lru) if isinstance(pool, ReferencePool) \
        else pool.num_free_blocks
    if op == "alloc" and free:
        table.append(pool.allocate())
        return table[-1]
    if op == "alloc_many":  # k + 1 blocks, or a refusal that changes nothing
        try:
            table += pool.allocate_many(k + 1)
        except NoFreeBlocks:
            return "refused"
        return table[-k - 1:]
    if op == "free" and table:
        pool.free(table[::-1])  # tail first
        table.clear()
    elif op == "cache" and table:
        pool.cache(table[-1], HASHES[k])
    elif op == "cache_many":  # the table's blocks, hashes from k on (repeats: duplicates)
        pool.cache_many(table, [HASHES[(k + i) % len(HASHES)] for i in range(len(table))])
    elif op == "hit" and HASHES[k] in pool.cached:
        block = pool.cached[HASHES[k]]
        if block not in table:
            pool.touch(block)
            table.append(block)
        return block
    elif op == "uncache" and table:
        pool.uncache(table[-1])
    elif op == "reset":
        return pool.reset_prefix_cache()
    return None


@settings(max_examples=400, deadline=None)
@given(ops)
def test_pool_matches_reference_lru(program):
    pool, ref = BlockPool(NUM_BLOCKS, 4), ReferencePool(NUM_BLOCKS)
    tables: list[list[int]] = [[] for _ in range(4)]
    ref_tables: list[list[int]] = [[] for _ in range(4)]
    for op, t, k in program:
        assert apply(pool, tables, op, t, k) == apply(ref, ref_tables, op, t, k), op
        assert pool.ref_count == ref.ref_count and pool.block_hash == ref.block_hash
        assert pool.cached == ref.cached and pool.counters == ref.counters
        assert pool._fresh == ref.fresh
        assert pool.cached_free_blocks() == list(ref.lru)  # eviction order too
        assert pool.num_cached_free_blocks == len(ref.lru)
        assert len(pool._lru) <= 2 * NUM_BLOCKS + 1


def test_revived_block_keeps_its_newest_place():
    """Free a, b; revive a and free it again: b (freed earlier) is evicted first."""
    pool = BlockPool(2, 4)
    a, b = pool.allocate(), pool.allocate()
    pool.cache(a, HASHES[0])
    pool.cache(b, HASHES[1])
    pool.free([a, b])
    pool.touch(a)
    pool.free([a])
    assert pool.cached_free_blocks() == [b, a]
    assert pool.allocate() == b and pool.allocate() == a
    assert pool.counters.evictions == 2 and not pool.cached


def test_many_revives_keep_the_queue_bounded():
    pool = BlockPool(3, 4)
    a = pool.allocate()
    pool.cache(a, HASHES[0])
    pool.free([a])
    for _ in range(100):  # each revive leaves a stale entry behind
        pool.touch(a)
        pool.free([a])
    assert len(pool._lru) <= 2 * 3 + 1
    assert pool.cached_free_blocks() == [a] and pool.num_free_blocks == 3


def test_allocate_many_is_all_or_nothing():
    pool = BlockPool(3, 4)
    held = pool.allocate_many(2)
    with pytest.raises(NoFreeBlocks):
        pool.allocate_many(2)
    assert held == [0, 1] and pool.num_free_blocks == 1 and pool.counters.allocations == 2
    assert pool.allocate_many(0) == []
