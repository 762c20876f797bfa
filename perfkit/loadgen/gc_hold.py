"""No full garbage collection while a load generator measures: a young one at most.

CPython's full (generation 2) collection scans every tracked object at once. In a load
generator's process that holds the CLI's modules and a level's records, one took 26-75 ms
at 110-225k objects (`perfkit sweep --target ... --concurrency 256 --workers 1`, measured
with gc.callbacks), and a closed loop's clients, all finishing together, sent their next
requests that much late: TTFT p99 read 86-90 ms where the server answers in 20, and 31 ms
with collection held back. Young collections (generations 0 and 1: the objects allocated
since the last few hundred allocations) stay on, so short-lived reference cycles are freed
as before; what survives them waits for the one full collection after the level, whose
CPU counts in the worker's cost.

Invariant: inside `held()` the generation-2 threshold is out of reach, so no automatic full
collection runs; on exit the thresholds are what they were and one full collection has run.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

NEVER = 1 << 30  # generation-1 collections before a full one: more than any level makes


@contextmanager
def held() -> Iterator[None]:
    """Young collections only inside; one full collection on the way out."""
    before = gc.get_threshold()
    gc.collect()  # start the level with nothing pending
    gc.set_threshold(before[0], before[1], NEVER)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.collect()
