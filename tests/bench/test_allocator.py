"""The allocator benchmark's traces do the pool's real work: every block allocated, hashed,
registered and freed, cached blocks evicted, and the engine trace's batched calls leave the
pool exactly as the same blocks taken one call at a time."""

from __future__ import annotations

from perfkit.bench import allocator
from perfkit.bench.allocator import (
    BLOCK_SIZE,
    BLOCKS_PER_SEQ,
    NUM_SEQS,
    PROMPT_BLOCKS,
    Event,
    bench_allocator,
    engine_trace,
)
from perfkit.engine.blocks import BlockHash, BlockPool, hash_block


def test_engine_trace_admits_a_prompt_then_decodes_one_block_at_a_time():
    events = engine_trace(3 * NUM_SEQS * BLOCKS_PER_SEQ)
    takes: dict[int, list[int]] = {}  # slot -> blocks per call of its current sequence
    lives = []
    for ev in events:
        if ev.end:
            lives.append(takes.pop(ev.seq, []))  # a slot may start by ending (none taken)
        else:
            takes.setdefault(ev.seq, []).append(len(ev.tokens) // BLOCK_SIZE)
    whole = [PROMPT_BLOCKS] + [1] * (BLOCKS_PER_SEQ - PROMPT_BLOCKS)
    started = [t for t in lives if t and t[0] == PROMPT_BLOCKS]  # the first ones start mid-decode
    assert len(started) > NUM_SEQS and all(t == whole for t in started)
    assert all(set(t) <= {1} for t in lives if not t or t[0] != PROMPT_BLOCKS)


def _singles(events: list[Event]) -> BlockPool:
    """The trace replayed with one call per block (no batched calls)."""
    pool = BlockPool(NUM_SEQS * (BLOCKS_PER_SEQ + 1), BLOCK_SIZE)
    tables: list[list[int]] = [[] for _ in range(NUM_SEQS)]
    parents: list[BlockHash | None] = [None] * NUM_SEQS
    for ev in events:
        if ev.end:
            pool.free(reversed(tables[ev.seq]))
            tables[ev.seq].clear()
            parents[ev.seq] = None
            continue
        for i in range(0, len(ev.tokens), BLOCK_SIZE):
            block = pool.allocate()
            tables[ev.seq].append(block)
            parents[ev.seq] = hash_block(parents[ev.seq], ev.tokens[i:i + BLOCK_SIZE])
            pool.cache(block, parents[ev.seq])
    return pool


def test_engine_replay_equals_single_calls(monkeypatch):
    events = engine_trace(2 * NUM_SEQS * BLOCKS_PER_SEQ)
    pools: list[BlockPool] = []

    class Recorded(BlockPool):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr(allocator, "BlockPool", Recorded)
    _, counters = allocator._replay(events, True)
    ref = _singles(events)
    assert counters == ref.counters and counters.evictions > 0
    assert pools[0].cached == ref.cached and pools[0].ref_count == ref.ref_count
    assert pools[0].cached_free_blocks() == ref.cached_free_blocks()


def test_bench_reports_both_traces_and_their_evictions():
    out = bench_allocator(num_blocks=20_000, repeats=1)
    assert out["blocks_per_s"] > 0 and out["blocks_per_s_engine"] > 0
    assert out["evictions_decode"] > 0 and out["evictions_engine"] > 0
    assert out["prompt_blocks"] + out["decode_blocks"] == BLOCKS_PER_SEQ
