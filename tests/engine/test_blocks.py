"""BlockPool and KVManager on tiny exact setups (block size 4, a handful of blocks)."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from perfkit.engine.blocks import BlockPool, hash_block, hash_blocks
from perfkit.engine.kv_manager import KVManager
from perfkit.engine.sequence import Sequence


def seq(tokens, sid=0):
    return Sequence(seq_id=sid, token_ids=list(tokens), num_prompt_tokens=len(tokens), max_tokens=8)


def test_hash_is_stable_across_processes():
    here = hash_block(None, [1, 2, 3, 4]).hex()
    code = ("from perfkit.engine.blocks import hash_block; "
            "print(hash_block(None, [1, 2, 3, 4]).hex())")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "123"}).stdout.strip()
    assert here == there


def test_hash_chains_parent():
    a = hash_blocks([1, 2, 3, 4, 5, 6, 7, 8], 4)
    b = hash_blocks([9, 2, 3, 4, 5, 6, 7, 8], 4)
    assert len(a) == 2 and a[1] != b[1]  # same second block, different parent
    assert a[1] == hash_block(a[0], [5, 6, 7, 8])


def test_hash_values_are_pinned():
    """The digests themselves (not only their chaining): cached hashes keep their meaning."""
    assert [h.hex() for h in hash_blocks(list(range(1, 10)), 4)] == [
        "93e085440feb4ed733491ce3a4ecfabd", "dc9c53e0e80994d8386f8c026eddd5cd"]


@given(st.lists(st.integers(0, 2**40), max_size=40), st.integers(1, 6), st.integers(0, 8),
       st.booleans())
def test_hash_blocks_is_a_chain_of_hash_block(token_ids, block_size, start, with_parent):
    """Packing a run at once hashes exactly as hash_block does block by block."""
    parent = hash_block(None, [7]) if with_parent else None
    expected, h = [], parent
    for i in range(start, len(token_ids) // block_size):
        h = hash_block(h, token_ids[i * block_size:(i + 1) * block_size])
        expected.append(h)
    assert hash_blocks(token_ids, block_size, start, parent) == expected


def test_allocate_order_and_free_queue():
    pool = BlockPool(4, 4)
    assert [pool.allocate() for _ in range(3)] == [0, 1, 2]
    pool.free([2, 1])  # tail first
    assert pool.num_free_blocks == 3
    assert pool.allocate() == 1  # the most recently freed unhashed block is reused first


def test_cached_blocks_evicted_lru_after_fresh_ones():
    pool = BlockPool(3, 4)
    a, b, c = (pool.allocate() for _ in range(3))
    pool.cache(a, hash_block(None, [1, 1, 1, 1]))
    pool.cache(b, hash_block(None, [2, 2, 2, 2]))
    pool.free([b, a, c])
    assert pool.allocate() == c  # unhashed first
    assert pool.allocate() == b  # then the least recently freed cached block
    assert pool.counters.evictions == 1
    assert pool.peek(hash_block(None, [2, 2, 2, 2])) is None
    assert pool.peek(hash_block(None, [1, 1, 1, 1])) == a


def test_prefix_hit_and_counts():
    pool = BlockPool(8, 4)
    kv = KVManager(pool)
    s1 = seq(range(1, 11))  # 10 tokens: 2 full blocks + 2
    assert kv.admit(s1, 10)
    s1.num_computed_tokens = 10
    kv.cache_computed(s1)
    s2 = seq([*range(1, 9), 42, 43, 44], sid=1)  # same first 8 tokens
    assert kv.admit(s2, 100)
    assert s2.num_computed_tokens == 8 and s2.num_cached_tokens == 8
    assert s2.block_ids[:2] == s1.block_ids[:2]
    assert pool.ref_count[s1.block_ids[0]] == 2
    assert pool.counters.hits == 2


def test_hit_never_covers_the_last_token():
    pool = BlockPool(8, 4)
    kv = KVManager(pool)
    s1 = seq(range(1, 9))
    kv.admit(s1, 8)
    s1.num_computed_tokens = 8
    kv.cache_computed(s1)
    s2 = seq(range(1, 9), sid=1)  # identical 8-token prompt
    kv.admit(s2, 8)
    assert s2.num_computed_tokens == 4  # one block recomputed to get the last logits


def test_admit_is_all_or_nothing():
    pool = BlockPool(2, 4)
    kv = KVManager(pool)
    s = seq(range(1, 13))
    assert not kv.admit(s, 12)
    assert pool.num_free_blocks == 2 and s.block_ids == []


def test_copy_on_write_after_fork():
    pool = BlockPool(6, 4)
    kv = KVManager(pool)
    parent = seq([1, 2, 3, 4, 5, 6])
    kv.admit(parent, 6)
    parent.num_computed_tokens = 6
    child = seq([1, 2, 3, 4, 5, 6], sid=1)
    kv.fork(parent, child)
    child.token_ids.append(7)
    copies = kv.allocate(child, 1)
    assert copies == [(parent.block_ids[1], child.block_ids[1])]
    assert child.block_ids[0] == parent.block_ids[0]
    assert pool.counters.copy_on_writes == 1
    assert pool.ref_count[parent.block_ids[1]] == 1


def test_free_releases_everything():
    pool = BlockPool(5, 4)
    kv = KVManager(pool)
    seqs = [seq(range(i, i + 7), sid=i) for i in range(2)]
    for s in seqs:
        assert kv.admit(s, 7)
    for s in seqs:
        kv.free(s)
    assert pool.num_free_blocks == 5 and sum(pool.ref_count) == 0
