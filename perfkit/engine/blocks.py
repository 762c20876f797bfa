"""BlockPool: physical KV blocks, ref counts, the prefix-hash cache, LRU eviction.

Invariants (checked by tests/engine/test_blocks_state.py after every operation):
- a block is either free (ref 0, in exactly one free structure) or referenced (ref > 0);
- a block's ref count equals the number of block tables that hold it;
- `cached[h] == b` if and only if `block_hash[b] == h` (one block per hash).

Free blocks live in two O(1) structures, allocated from in this order:
1. `_fresh`: free blocks without a hash, a stack (the most recently freed is reused first);
2. the LRU queue: free blocks that still hold a cached prefix, oldest first; allocating
   one evicts its hash. A hit on a cached-free block revives it (it leaves the LRU).
Callers free a sequence's blocks tail first, so a prefix's tail is evicted before
its head (the head is what other requests share).

The LRU queue is a deque with lazy removal (an OrderedDict cost a third of a block's
allocate + hash + free): a revived block's entry stays queued and is skipped when it
reaches the head. An entry is live iff it is its block's newest (`_num_queued[b]` counts
a block's entries) and the block is free and hashed; `_num_cached_free` counts the live
ones. Stale entries are at most one per revive and are dropped when the queue outgrows
twice the pool, so the queue stays O(num_blocks).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NewType

import xxhash

BlockHash = NewType("BlockHash", bytes)  # 16-byte XXH3-128 digest, stable across processes


# XXH3-128 typed as producing a BlockHash: NewType's constructor is a call per block (a third
# of the hash's cost); the digest is exactly the bytes BlockHash(...) would wrap.
_digest: Callable[[bytes], BlockHash] = xxhash.xxh3_128_digest  # type: ignore[assignment]
# token count -> its bound pack (token ids as little-endian int64); a dict, no call overhead.
# Counts are one block's or one run's of whole blocks: at most max context / block size keys.
_PACKS: dict[int, Callable[..., bytes]] = {}


def _new_pack(num_tokens: int) -> Callable[..., bytes]:
    """The pack of a token count not seen yet."""
    return _PACKS.setdefault(num_tokens, struct.Struct(f"<{num_tokens}q").pack)


def hash_block(parent: BlockHash | None, token_ids: Sequence[int]) -> BlockHash:
    """Chained hash of one full block: H(parent hash, token ids). Never Python's salted hash().

    XXH3-128 (the xxhash package): stable across processes and machines, and 3x faster than
    blake2b here, which is most of the allocator's cost with prefix caching. Not
    cryptographic: fine for a benchmark's cache keys, where no input is adversarial."""
    pack = _PACKS.get(len(token_ids)) or _new_pack(len(token_ids))
    return _digest(parent + pack(*token_ids) if parent else pack(*token_ids))


def hash_blocks(token_ids: Sequence[int], block_size: int, start: int = 0,
                parent: BlockHash | None = None) -> list[BlockHash]:
    """Chained hashes of the full blocks of token_ids[start*block_size:]: each equals
    hash_block(previous, block's ids), with the run packed in one call (a prompt's blocks
    hash at 0.3 us each instead of 0.5-0.8)."""
    end = len(token_ids) // block_size
    if end <= start:
        return []
    num_tokens = (end - start) * block_size
    pack = _PACKS.get(num_tokens) or _new_pack(num_tokens)
    packed = pack(*token_ids[start * block_size:end * block_size])
    width = block_size * 8
    out = []
    for i in range(0, len(packed), width):
        parent = _digest(parent + packed[i:i + width] if parent else packed[i:i + width])
        out.append(parent)
    return out


@dataclass
class PoolCounters:
    """Deterministic counts for a profile and seed."""

    allocations: int = 0  # blocks handed out
    frees: int = 0  # references dropped to zero
    hits: int = 0  # prefix-cache block lookups that found a block
    misses: int = 0  # lookups that did not
    evictions: int = 0  # cached hashes dropped to reuse their block
    copy_on_writes: int = 0  # shared blocks copied before a write


class NoFreeBlocks(RuntimeError):
    """Internal: allocate() on an empty pool (callers check num_free_blocks first)."""


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("a block pool needs num_blocks >= 1 and block_size >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.ref_count = [0] * num_blocks
        self.block_hash: list[BlockHash | None] = [None] * num_blocks
        self.cached: dict[BlockHash, int] = {}
        self._fresh: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() gives block 0 first
        self._lru: deque[int] = deque()  # freed hashed blocks, oldest first, stale entries too
        self._num_queued = [0] * num_blocks  # a block's entries in _lru; its newest may be live
        self._num_cached_free = 0  # live _lru entries: free blocks that hold a hash
        self.num_shared_blocks = 0  # blocks with ref_count > 1 (in several block tables)
        self.counters = PoolCounters()

    @property
    def num_free_blocks(self) -> int:
        """Blocks allocate() can hand out now (fresh + cached-but-free)."""
        return len(self._fresh) + self._num_cached_free

    @property
    def num_cached_free_blocks(self) -> int:
        return self._num_cached_free

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def cached_free_blocks(self) -> list[int]:
        """The free blocks that hold a hash, least recently freed (next evicted) first."""
        newest: dict[int, None] = {}  # a block's newest entry decides its place
        for block in reversed(self._lru):
            newest.setdefault(block, None)
        ref, hashes = self.ref_count, self.block_hash
        return [b for b in reversed(newest) if ref[b] == 0 and hashes[b] is not None]

    def allocate(self) -> int:
        """One block with ref count 1; evicts the least recently used cached block if needed.
        The eviction is _evict(1) inline: with caching, every allocation in steady state
        evicts, and the call and its list cost a tenth of a block's allocate + hash + free."""
        if self._fresh:
            block = self._fresh.pop()
        elif self._num_cached_free:
            lru, queued, ref, hashes = self._lru, self._num_queued, self.ref_count, self.block_hash
            while True:  # a live entry is queued (_num_cached_free > 0): the loop ends
                block = lru.popleft()
                queued[block] -= 1
                if not queued[block] and not ref[block] and hashes[block] is not None:
                    break
            del self.cached[hashes[block]]  # type: ignore[arg-type]
            hashes[block] = None
            self._num_cached_free -= 1
            self.counters.evictions += 1
        else:
            raise NoFreeBlocks("no free KV blocks")
        self.ref_count[block] = 1
        self.counters.allocations += 1
        return block

    def allocate_many(self, num_blocks: int) -> list[int]:
        """`num_blocks` blocks, the same ones in the same order as that many allocate()
        calls hand out (fresh ones first, then LRU evictions); all or none."""
        assert num_blocks >= 0, num_blocks
        if num_blocks > self.num_free_blocks:
            raise NoFreeBlocks(f"{num_blocks} KV blocks asked, {self.num_free_blocks} free")
        fresh = self._fresh
        num_fresh = min(num_blocks, len(fresh))
        blocks = fresh[len(fresh) - num_fresh:][::-1]  # pop() order
        del fresh[len(fresh) - num_fresh:]
        if num_fresh < num_blocks:
            blocks += self._evict(num_blocks - num_fresh)
        ref = self.ref_count
        for block in blocks:
            ref[block] = 1
        self.counters.allocations += num_blocks
        return blocks

    def _evict(self, num_blocks: int) -> list[int]:
        """Take the `num_blocks` least recently freed cached blocks off the LRU queue and
        drop their hashes (the caller checked that as many are free)."""
        lru, queued, ref, hashes = self._lru, self._num_queued, self.ref_count, self.block_hash
        cached, popleft = self.cached, lru.popleft
        out: list[int] = []
        left = num_blocks
        while left:  # as many live entries are queued: the queue never runs dry
            block = popleft()
            queued[block] -= 1
            if not queued[block] and not ref[block] and hashes[block] is not None:
                del cached[hashes[block]]  # type: ignore[arg-type]
                hashes[block] = None
                out.append(block)
                left -= 1
        self._num_cached_free -= num_blocks
        self.counters.evictions += num_blocks
        return out

    def free(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block, in the order given (pass tail first)."""
        ref, hashes, fresh = self.ref_count, self.block_hash, self._fresh
        lru, queued = self._lru, self._num_queued
        num_freed = num_cached = 0
        num_unshared = 0
        for block in blocks:
            ref[block] -= 1
            if ref[block] == 1:
                num_unshared += 1
            elif ref[block] == 0:
                num_freed += 1
                if hashes[block] is None:
                    fresh.append(block)
                else:
                    lru.append(block)
                    queued[block] += 1
                    num_cached += 1
        self.counters.frees += num_freed
        self._num_cached_free += num_cached
        self.num_shared_blocks -= num_unshared

    def peek(self, h: BlockHash) -> int | None:
        """The cached block holding hash `h`, counting no hit or miss: for admission checks."""
        return self.cached.get(h) if self.enable_caching else None

    def touch(self, block: int) -> None:
        """Take a reference to a cached block (a prefix hit); revive it if it was free
        (its LRU entry goes stale)."""
        if self.ref_count[block] == 0:
            self._num_cached_free -= 1
            if len(self._lru) > 2 * self.num_blocks:
                self._drop_stale()
        elif self.ref_count[block] == 1:
            self.num_shared_blocks += 1
        self.ref_count[block] += 1

    def _drop_stale(self) -> None:
        """Rebuild the LRU queue from its live entries, in order (amortized O(1) a revive:
        it runs after more than num_blocks revives since the last rebuild)."""
        self._lru = deque(self.cached_free_blocks())
        self._num_queued = [0] * self.num_blocks
        for block in self._lru:
            self._num_queued[block] = 1

    def cache(self, block: int, h: BlockHash) -> None:
        """Register a referenced full block's hash. The first block with a hash stays the
        cached one; a duplicate stays unhashed, so when freed it is reused before any cached
        block. (setdefault: one dict operation tests and inserts.)"""
        if (self.block_hash[block] is None and self.enable_caching
                and self.cached.setdefault(h, block) == block):
            self.block_hash[block] = h

    def cache_many(self, blocks: Sequence[int], hashes: Sequence[BlockHash]) -> None:
        """cache(block, h) for each pair, in order (a prefill chunk's full blocks)."""
        if not self.enable_caching:
            return
        block_hash, register = self.block_hash, self.cached.setdefault
        for block, h in zip(blocks, hashes, strict=True):
            if block_hash[block] is None and register(h, block) == block:
                block_hash[block] = h

    def uncache(self, block: int) -> None:
        """Forget a referenced block's hash (it was registered, then never computed)."""
        h = self.block_hash[block]
        if h is not None and self.cached.get(h) == block:
            del self.cached[h]
        self.block_hash[block] = None

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash (vLLM's reset_prefix_cache). Refused (False) while any
        block is in use: a running request's blocks may be cached too."""
        if self.num_used_blocks:
            return False
        for block in self.cached_free_blocks():
            self.block_hash[block] = None
            self._fresh.append(block)
        self._lru.clear()
        self._num_queued = [0] * self.num_blocks
        self._num_cached_free = 0
        self.cached.clear()
        return True

    def reset_counters(self) -> None:
        self.counters = PoolCounters()
