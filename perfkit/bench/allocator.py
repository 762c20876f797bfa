"""Microbenchmark: BlockPool allocate + free on a decode trace.

The trace: `num_seqs` sequences decode one token per step; a sequence takes a new
block every block_size tokens and, with hashing, hashes each block when it fills
(chained blake2b over its token ids) and registers it in the prefix cache; after
`blocks_per_seq` blocks it ends, its blocks are freed tail first, and a new
sequence takes its place. Only block events are timed work: the trace is
precomputed, so per-token Python (appending tokens) is not in the figure.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from perfkit.engine.blocks import BlockPool, hash_block

NUM_SEQS = 256
BLOCK_SIZE = 16
BLOCKS_PER_SEQ = 16


@dataclass(frozen=True)
class Event:
    seq: int  # which slot of the batch
    end: bool  # False: the sequence takes a block; True: it ends, blocks freed tail first
    tokens: tuple[int, ...] = ()  # the block's token ids (hashed when it fills)


def decode_trace(num_blocks: int, seed: int = 0) -> list[Event]:
    """Block events in step order until `num_blocks` blocks have been allocated."""
    rng = random.Random(seed)
    phase = [rng.randrange(BLOCKS_PER_SEQ) for _ in range(NUM_SEQS)]  # staggered starts
    events: list[Event] = []
    while len(events) < num_blocks:
        for s in range(NUM_SEQS):  # one block boundary per sequence per block_size steps
            tokens = tuple(rng.randrange(1, 32000) for _ in range(BLOCK_SIZE))
            events.append(Event(s, False, tokens))
            phase[s] += 1
            if phase[s] % BLOCKS_PER_SEQ == 0:
                events.append(Event(s, True))
    return events


def _replay(events: list[Event], hashing: bool) -> tuple[float, int]:
    pool = BlockPool(NUM_SEQS * (BLOCKS_PER_SEQ + 1), BLOCK_SIZE, enable_caching=hashing)
    tables: list[list[int]] = [[] for _ in range(NUM_SEQS)]
    parents: list[bytes | None] = [None] * NUM_SEQS
    start = time.perf_counter()
    for ev in events:
        table = tables[ev.seq]
        if ev.end:
            pool.free(reversed(table))
            table.clear()
            parents[ev.seq] = None
            continue
        block = pool.allocate()
        table.append(block)
        if hashing:
            h = hash_block(parents[ev.seq], ev.tokens)  # type: ignore[arg-type]
            pool.cache(block, h)
            parents[ev.seq] = h
    elapsed = time.perf_counter() - start
    return elapsed, pool.counters.allocations


def bench_allocator(num_blocks: int = 200_000, repeats: int = 3) -> dict[str, float]:
    events = decode_trace(num_blocks)
    best = {}
    for hashing in (True, False):
        runs = [_replay(events, hashing) for _ in range(repeats)]
        elapsed, allocs = min(runs)
        best[hashing] = allocs / elapsed
    return {"blocks_per_s": best[True], "blocks_per_s_nohash": best[False],
            "num_blocks": num_blocks, "block_size": BLOCK_SIZE}
