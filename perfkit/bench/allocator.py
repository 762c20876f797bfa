"""Microbenchmark: BlockPool allocate + hash + free on two block traces.

Both traces: `NUM_SEQS` sequences of BLOCKS_PER_SEQ blocks each; with hashing, each full
block gets its chained XXH3-128 hash over its token ids and is registered in the prefix
cache; when a sequence ends its blocks are freed tail first and a new sequence takes its
slot. The pool holds a little more than the live blocks, so with hashing nearly every
allocation evicts a cached free block (LRU), as a busy engine's pool does.

- decode trace: every block is taken one per call (allocate, hash_block, cache), as a
  decoding sequence takes one at each block boundary;
- engine trace: a sequence is admitted with its prompt's PROMPT_BLOCKS blocks in one call,
  as KVManager.admit does (allocate_many, hash_blocks over the prompt, cache_many), then
  decodes its last DECODE_BLOCKS one per call as above. 12 + 4 blocks is the default
  profile's prompt : output ratio (96 : 32 tokens on average).

Only block events are timed work: the traces are precomputed, so per-token Python
(appending tokens) is not in the figures.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from perfkit.engine.blocks import BlockHash, BlockPool, PoolCounters, hash_block, hash_blocks

NUM_SEQS = 256
BLOCK_SIZE = 16
BLOCKS_PER_SEQ = 16
PROMPT_BLOCKS = 12  # engine trace: blocks taken at admission; the rest are decoded
DECODE_BLOCKS = BLOCKS_PER_SEQ - PROMPT_BLOCKS


@dataclass(frozen=True)
class Event:
    seq: int  # which slot of the batch
    end: bool  # False: the sequence takes blocks; True: it ends, blocks freed tail first
    tokens: tuple[int, ...] = ()  # the token ids of the blocks it takes (one or a prompt's)


def _tokens(rng: random.Random, num_blocks: int) -> tuple[int, ...]:
    return tuple(rng.randrange(1, 32000) for _ in range(num_blocks * BLOCK_SIZE))


def decode_trace(num_blocks: int, seed: int = 0) -> list[Event]:
    """Block events in step order until `num_blocks` blocks have been allocated."""
    rng = random.Random(seed)
    phase = [rng.randrange(BLOCKS_PER_SEQ) for _ in range(NUM_SEQS)]  # staggered starts
    events: list[Event] = []
    while len(events) < num_blocks:
        for s in range(NUM_SEQS):  # one block boundary per sequence per block_size steps
            events.append(Event(s, False, _tokens(rng, 1)))
            phase[s] += 1
            if phase[s] % BLOCKS_PER_SEQ == 0:
                events.append(Event(s, True))
    return events


def engine_trace(num_blocks: int, seed: int = 0) -> list[Event]:
    """Admissions (a prompt's blocks), decode boundaries (one block) and ends, in step
    order, until at least `num_blocks` blocks have been allocated."""
    rng = random.Random(seed)
    held = [rng.randrange(PROMPT_BLOCKS, BLOCKS_PER_SEQ + 1) for _ in range(NUM_SEQS)]
    events: list[Event] = []
    allocated = 0
    while allocated < num_blocks:
        for s in range(NUM_SEQS):  # a slot admits a new sequence once its last one ended
            take = PROMPT_BLOCKS if held[s] == BLOCKS_PER_SEQ else 1
            if held[s] == BLOCKS_PER_SEQ:
                events.append(Event(s, True))
                held[s] = 0
            events.append(Event(s, False, _tokens(rng, take)))
            held[s] += take
            allocated += take
    return events


def _replay(events: list[Event], hashing: bool) -> tuple[float, PoolCounters]:
    """Seconds to replay a trace on a fresh pool, and its counts. A one-block event is one
    allocate (+ cache) call; a prompt's blocks are one allocate_many (+ cache_many), as
    the engine admits a prompt: the decode trace is all one-block events."""
    pool = BlockPool(NUM_SEQS * (BLOCKS_PER_SEQ + 1), BLOCK_SIZE, enable_caching=hashing)
    tables: list[list[int]] = [[] for _ in range(NUM_SEQS)]
    parents: list[BlockHash | None] = [None] * NUM_SEQS
    start = time.perf_counter()
    for ev in events:
        table = tables[ev.seq]
        if ev.end:
            pool.free(reversed(table))
            table.clear()
            parents[ev.seq] = None
        elif len(ev.tokens) <= BLOCK_SIZE:  # a decode boundary
            block = pool.allocate()
            table.append(block)
            if hashing:
                h = hash_block(parents[ev.seq], ev.tokens)
                pool.cache(block, h)
                parents[ev.seq] = h
        else:  # an admission: the prompt's blocks at once
            blocks = pool.allocate_many(len(ev.tokens) // BLOCK_SIZE)
            table += blocks
            if hashing:
                hashes = hash_blocks(ev.tokens, BLOCK_SIZE, 0, parents[ev.seq])
                pool.cache_many(blocks, hashes)
                parents[ev.seq] = hashes[-1]
    elapsed = time.perf_counter() - start
    return elapsed, pool.counters


def _best(events: list[Event], hashing: bool,
          repeats: int) -> tuple[float, PoolCounters]:
    """Blocks per second of the fastest of `repeats` replays, and the pool's counts (the
    trace is fixed: every replay counts the same)."""
    runs = [_replay(events, hashing) for _ in range(repeats)]
    return runs[0][1].allocations / min(seconds for seconds, _ in runs), runs[0][1]


def bench_allocator(num_blocks: int = 200_000, repeats: int = 3) -> dict[str, float]:
    """Blocks/s on the decode trace with and without hashing and on the engine trace with
    hashing. `evictions_*` count the cached blocks evicted: the figures include them."""
    decode = decode_trace(num_blocks)
    per_s, counts = _best(decode, True, repeats)
    per_s_nohash, _ = _best(decode, False, repeats)
    per_s_engine, counts_engine = _best(engine_trace(num_blocks), True, repeats)
    return {"blocks_per_s": per_s, "blocks_per_s_nohash": per_s_nohash,
            "blocks_per_s_engine": per_s_engine, "evictions_decode": counts.evictions,
            "evictions_engine": counts_engine.evictions, "num_blocks": num_blocks,
            "block_size": BLOCK_SIZE, "prompt_blocks": PROMPT_BLOCKS,
            "decode_blocks": DECODE_BLOCKS}
