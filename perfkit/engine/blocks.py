"""BlockPool: physical KV blocks, ref counts, the prefix-hash cache, LRU eviction.

Invariants (checked by tests/engine/test_blocks_state.py after every operation):
- a block is either free (ref 0, in exactly one free structure) or referenced (ref > 0);
- a block's ref count equals the number of block tables that hold it;
- `cached[h] == b` if and only if `block_hash[b] == h` (one block per hash).

Free blocks live in two O(1) structures, allocated from in this order:
1. `_fresh`: free blocks without a hash, a stack (the most recently freed is reused first);
2. `_lru`: free blocks that still hold a cached prefix, oldest first; allocating one
   evicts its hash. A hit on a cached-free block revives it (removed from `_lru`).
Callers free a sequence's blocks tail first, so a prefix's tail is evicted before
its head (the head is what other requests share).
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NewType

import xxhash

BlockHash = NewType("BlockHash", bytes)  # 16-byte XXH3-128 digest, stable across processes


# XXH3-128 typed as producing a BlockHash: NewType's constructor is a call per block (a third
# of the hash's cost); the digest is exactly the bytes BlockHash(...) would wrap.
_digest: Callable[[bytes], BlockHash] = xxhash.xxh3_128_digest  # type: ignore[assignment]
_PACKERS: dict[int, struct.Struct] = {}  # token count -> its packer (a dict: no call overhead)


def _new_packer(num_tokens: int) -> struct.Struct:
    """The packer of a token count not seen yet (token ids as little-endian int64)."""
    return _PACKERS.setdefault(num_tokens, struct.Struct(f"<{num_tokens}q"))


def hash_block(parent: BlockHash | None, token_ids: Sequence[int]) -> BlockHash:
    """Chained hash of one full block: H(parent hash, token ids). Never Python's salted hash().

    XXH3-128 (the xxhash package): stable across processes and machines, and 3x faster than
    blake2b here, which is most of the allocator's cost with prefix caching. Not
    cryptographic: fine for a benchmark's cache keys, where no input is adversarial."""
    packer = _PACKERS.get(len(token_ids)) or _new_packer(len(token_ids))
    return _digest(parent + packer.pack(*token_ids) if parent else packer.pack(*token_ids))


def hash_blocks(token_ids: Sequence[int], block_size: int, start: int = 0,
                parent: BlockHash | None = None) -> list[BlockHash]:
    """Chained hashes of the full blocks of token_ids[start*block_size:]."""
    out = []
    for i in range(start, len(token_ids) // block_size):
        parent = hash_block(parent, token_ids[i * block_size:(i + 1) * block_size])
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
        self._lru: OrderedDict[int, None] = OrderedDict()
        self.counters = PoolCounters()

    @property
    def num_free_blocks(self) -> int:
        """Blocks allocate() can hand out now (fresh + cached-but-free)."""
        return len(self._fresh) + len(self._lru)

    @property
    def num_cached_free_blocks(self) -> int:
        return len(self._lru)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def allocate(self) -> int:
        """One block with ref count 1; evicts the least recently used cached block if needed."""
        if self._fresh:
            block = self._fresh.pop()
        elif self._lru:
            block = self._lru.popitem(last=False)[0]
            h = self.block_hash[block]  # a cached-free block always holds a hash: evict it
            del self.cached[h]  # type: ignore[arg-type]
            self.block_hash[block] = None
            self.counters.evictions += 1
        else:
            raise NoFreeBlocks("no free KV blocks")
        self.ref_count[block] = 1
        self.counters.allocations += 1
        return block

    def free(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block, in the order given (pass tail first)."""
        ref = self.ref_count
        for block in blocks:
            ref[block] -= 1
            if ref[block] == 0:
                self.counters.frees += 1
                if self.block_hash[block] is None:
                    self._fresh.append(block)
                else:
                    self._lru[block] = None

    def lookup(self, h: BlockHash) -> int | None:
        """The cached block holding hash `h`, counting a hit or a miss (no reference taken)."""
        block = self.cached.get(h) if self.enable_caching else None
        if block is None:
            self.counters.misses += 1
        else:
            self.counters.hits += 1
        return block

    def peek(self, h: BlockHash) -> int | None:
        """Like lookup() without counting: for admission checks."""
        return self.cached.get(h) if self.enable_caching else None

    def touch(self, block: int) -> None:
        """Take a reference to a cached block (a prefix hit); revive it if it was free."""
        if self.ref_count[block] == 0:
            del self._lru[block]
        self.ref_count[block] += 1

    def cache(self, block: int, h: BlockHash) -> None:
        """Register a full block's hash. The first block with a hash stays the cached one;
        a duplicate stays unhashed, so when freed it is reused before any cached block."""
        if not self.enable_caching or self.block_hash[block] is not None or h in self.cached:
            return
        self.block_hash[block] = h
        self.cached[h] = block

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
        for block in self._lru:
            self.block_hash[block] = None
            self._fresh.append(block)
        self._lru.clear()
        self.cached.clear()
        return True

    def reset_counters(self) -> None:
        self.counters = PoolCounters()
