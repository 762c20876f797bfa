"""A hypothesis state machine over BlockPool + KVManager: allocate, append, fork (sharing,
or copying every shared block as a group without sharing does), free, evict; after every
step the pool's invariants hold, ref counts and the shared-block count equal the block
tables' references, no shared block is written, and block contents match hashes."""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from perfkit.engine.blocks import BlockPool, hash_blocks
from perfkit.engine.group import start_group
from perfkit.engine.kv_manager import KVManager
from perfkit.engine.sequence import Sequence

BS = 4
NUM_BLOCKS = 12
tokens = st.lists(st.integers(1, 3), min_size=1, max_size=14)  # small alphabet: many hits


class PoolMachine(RuleBasedStateMachine):
    seqs = Bundle("seqs")

    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(NUM_BLOCKS, BS, enable_caching=True)
        self.kv = KVManager(self.pool)
        self.live: dict[int, Sequence] = {}
        self.content: dict[int, list[int | None]] = {}  # block -> token written per slot
        self.next_id = 0

    def _compute(self, s: Sequence) -> None:
        """Write the uncomputed tokens' 'K/V' (the token ids) into their slots."""
        for pos in range(s.num_computed_tokens, s.num_tokens):
            block = s.block_ids[pos // BS]
            assert self.pool.ref_count[block] == 1, "wrote into a shared block"
            slots = self.content.setdefault(block, [None] * BS)
            slots[pos % BS] = s.token_ids[pos]
        s.num_computed_tokens = s.num_tokens
        self.kv.cache_computed(s)

    @rule(target=seqs, prompt=tokens)
    def add(self, prompt):
        s = Sequence(self.next_id, list(prompt), len(prompt), 64)
        self.next_id += 1
        if not self.kv.admit(s, len(prompt)):
            return s  # not admitted: holds nothing
        self._compute(s)
        self.live[s.seq_id] = s
        return s

    @rule(s=seqs, more=tokens)
    def append(self, s, more):
        if s.seq_id not in self.live:
            return
        s.token_ids.extend(more)
        copies = self.kv.allocate(s, s.num_uncomputed)
        if copies is None:
            s.token_ids[-len(more):] = []
            return
        for src, dst in copies:
            self.content[dst] = list(self.content[src])
        self._compute(s)

    @rule(target=seqs, s=seqs, share=st.booleans())
    def fork(self, s, share):
        child = Sequence(self.next_id, [], 0, 64)
        self.next_id += 1
        if s.seq_id not in self.live:
            return child
        child.token_ids = list(s.token_ids)
        child.num_prompt_tokens = s.num_prompt_tokens
        child.block_hashes = list(s.block_hashes)
        if not share:  # a group that does not share: its next write copies every block
            child.group = start_group(Sequence(-1, [], 0, 1), "sample", 2, share=False)
        self.kv.fork(s, child)
        self.live[child.seq_id] = child
        return child

    @rule(s=seqs)
    def free(self, s):
        if self.live.pop(s.seq_id, None) is not None:
            self.kv.free(s)

    @invariant()
    def free_xor_referenced(self):
        fresh, lru = self.pool._fresh, self.pool.cached_free_blocks()
        assert len(fresh) == len(set(fresh)) and len(lru) == len(set(lru))
        assert not set(fresh) & set(lru)
        assert self.pool.num_cached_free_blocks == len(lru)
        for b in range(NUM_BLOCKS):
            free = b in fresh or b in lru
            assert free == (self.pool.ref_count[b] == 0), b
            assert (b in lru) == (free and self.pool.block_hash[b] is not None), b

    @invariant()
    def lru_queue_bounded(self):
        """Stale entries (revived blocks) never pile up past the rebuild bound."""
        assert len(self.pool._lru) <= 2 * NUM_BLOCKS + 1
        assert sum(self.pool._num_queued) == len(self.pool._lru)

    @invariant()
    def refs_equal_table_references(self):
        held = Counter(b for s in self.live.values() for b in s.block_ids)
        assert all(self.pool.ref_count[b] == held.get(b, 0) for b in range(NUM_BLOCKS))
        assert self.pool.num_shared_blocks == sum(1 for n in held.values() if n > 1)

    @invariant()
    def cached_hashes_match_contents(self):
        for h, b in self.pool.cached.items():
            assert self.pool.block_hash[b] == h
        for s in self.live.values():
            hashes = hash_blocks(s.token_ids, BS)
            for i in range(s.num_hashed_blocks):
                b = s.block_ids[i]
                assert self.content[b] == s.token_ids[i * BS:(i + 1) * BS]
                if self.pool.block_hash[b] is not None:
                    assert self.pool.block_hash[b] == hashes[i]

    def teardown(self):
        for s in list(self.live.values()):
            self.kv.free(s)
        assert self.pool.num_free_blocks == NUM_BLOCKS
        assert sum(self.pool.ref_count) == 0


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPoolMachine = PoolMachine.TestCase
