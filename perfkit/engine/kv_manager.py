"""Per-sequence KV bookkeeping over the BlockPool: prefix hits, slots, copy-on-write, free."""

from __future__ import annotations

from perfkit.config.units import cdiv
from perfkit.engine.blocks import BlockHash, BlockPool, hash_blocks
from perfkit.engine.sequence import Sequence


class KVManager:
    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.block_size = pool.block_size

    def _full_hashes(self, seq: Sequence) -> list[BlockHash]:
        """Chained hashes of all full blocks of seq.token_ids, extended incrementally."""
        bs, hashes = self.block_size, seq.block_hashes
        if len(hashes) < seq.num_tokens // bs:
            parent = hashes[-1] if hashes else None
            hashes.extend(hash_blocks(seq.token_ids, bs, len(hashes), parent))
        return hashes

    def _prefix_hits(self, seq: Sequence) -> list[int]:
        """Cached blocks for the longest cached prefix; at most (num_tokens - 1) tokens,
        so the step still computes the last token and gets its logits."""
        if not self.pool.enable_caching or seq.prompt_logprobs is not None:
            return []  # prompt_logprobs: every position is computed (as vLLM skips the cache)
        limit = (seq.num_tokens - 1) // self.block_size
        hits = []
        for h in self._full_hashes(seq)[:limit]:
            block = self.pool.peek(h)
            if block is None:
                break
            hits.append(block)
        return hits

    def admit(self, seq: Sequence, num_new_tokens: int, full_prompt: bool = True) -> bool:
        """First allocation of a waiting sequence: take its prefix hits, then slots for
        `num_new_tokens` more tokens (clipped to what is uncomputed). All or nothing.

        full_prompt (vLLM v1's `scheduler_reserve_full_isl`, its default): admit only when
        the blocks of all its tokens fit in the free blocks, though only the first chunk's
        are allocated now; else only the first chunk's blocks need to fit."""
        assert not seq.block_ids, "admit() on a sequence that holds blocks"
        hits = self._prefix_hits(seq)
        num_hit_tokens = len(hits) * self.block_size
        num_new = min(num_new_tokens, seq.num_tokens - num_hit_tokens)
        need = cdiv(num_hit_tokens + num_new, self.block_size) - len(hits)
        revived = sum(1 for b in hits if self.pool.ref_count[b] == 0)
        check = cdiv(seq.num_tokens, self.block_size) - len(hits) if full_prompt else need
        if check + revived > self.pool.num_free_blocks:
            return False
        if self.pool.enable_caching:
            eligible = (seq.num_tokens - 1) // self.block_size
            self.pool.counters.hits += len(hits)
            self.pool.counters.misses += eligible - len(hits)
        for block in hits:
            self.pool.touch(block)
        seq.block_ids = hits + self.pool.allocate_many(need)
        seq.num_computed_tokens = num_hit_tokens
        seq.num_hashed_blocks = len(hits)
        if seq.num_preemptions == 0:
            seq.num_cached_tokens = num_hit_tokens
        self.cache_scheduled(seq, num_new)
        return True

    def blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        """New blocks (incl. copy-on-writes) to compute `num_new_tokens` more tokens."""
        total = cdiv(seq.num_computed_tokens + num_new_tokens, self.block_size)
        return max(0, total - len(seq.block_ids)) + len(self._cow_indices(seq))

    def _cow_indices(self, seq: Sequence) -> list[int]:
        """Table indices to copy before this sequence writes: the block its next token
        lands in when another table shares it. A group that does not share
        (SequenceGroup.share False) copies every shared block of its table instead."""
        ref, table = self.pool.ref_count, seq.block_ids
        if seq.group is not None and not seq.group.share:
            return [i for i, b in enumerate(table) if ref[b] > 1]
        idx = seq.num_computed_tokens // self.block_size
        return [idx] if idx < len(table) and ref[table[idx]] > 1 else []

    def allocate(self, seq: Sequence, num_new_tokens: int) -> list[tuple[int, int]] | None:
        """Slots for `num_new_tokens` more tokens of a running sequence. Returns the
        (src, dst) block copies the cache must make (copy-on-write), or None when the
        pool is short (nothing allocated then). A shared block is never written: the
        writer gets a copy and drops its reference (the last holder writes in place)."""
        if self.blocks_needed(seq, num_new_tokens) > self.pool.num_free_blocks:
            return None
        copies = []
        for idx in self._cow_indices(seq):
            old, new = seq.block_ids[idx], self.pool.allocate()
            self.pool.free([old])
            seq.block_ids[idx] = new
            self.pool.counters.copy_on_writes += 1
            copies.append((old, new))
        total = cdiv(seq.num_computed_tokens + num_new_tokens, self.block_size)
        if len(seq.block_ids) < total:
            seq.block_ids += self.pool.allocate_many(total - len(seq.block_ids))
        self.cache_scheduled(seq, num_new_tokens)
        return copies

    def cache_scheduled(self, seq: Sequence, num_new_tokens: int) -> None:
        """Register the hashes of the blocks this step fills (vLLM v1 registers them when
        it schedules them, so a request admitted later in the same step already hits
        them: the step writes every K/V before any attention reads it)."""
        num_full = (seq.num_computed_tokens + num_new_tokens) // self.block_size
        if not self.pool.enable_caching or num_full <= seq.num_hashed_blocks:
            return
        first, hashes = seq.num_hashed_blocks, self._full_hashes(seq)
        self.pool.cache_many(seq.block_ids[first:num_full], hashes[first:num_full])
        seq.num_hashed_blocks = num_full

    def cache_computed(self, seq: Sequence) -> None:
        """Register the hashes of blocks that are full and computed."""
        self.cache_scheduled(seq, 0)

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Share every block of `parent` with `child` (parallel sampling, beam search):
        one more reference each, no copy until one of them writes (allocate)."""
        for block in parent.block_ids:
            self.pool.touch(block)
        child.block_ids = list(parent.block_ids)
        child.num_computed_tokens = parent.num_computed_tokens
        child.num_hashed_blocks = parent.num_hashed_blocks

    def free(self, seq: Sequence) -> None:
        """Release the sequence's blocks tail first; it keeps its hashes for a later hit.
        Blocks registered for this step but never computed (preempted after being
        scheduled) lose their hash: no later request may hit K/V that was not written."""
        for i in range(seq.num_computed_tokens // self.block_size, seq.num_hashed_blocks):
            self.pool.uncache(seq.block_ids[i])
        self.pool.free(reversed(seq.block_ids))
        seq.block_ids = []
        seq.num_hashed_blocks = 0


def table_tails(running: list[Sequence], block_size: int) -> tuple[int, int]:
    """(empty slots of the running tables' last blocks, each physical block once; the
    tables' entries). After a step only a table's last block can be partly filled, and
    tables that share a last block have computed the same tokens into it."""
    tails = entries = 0
    last_blocks: set[int] = set()
    for s in running:
        table = s.block_ids
        entries += len(table)
        if table and table[-1] not in last_blocks:
            last_blocks.add(table[-1])
            tails += len(table) * block_size - s.num_computed_tokens
    return tails, entries
