"""Plant GC pressure in perfkit's own process, then run its CLI (README: "Why is my p99 high?").

A daemon thread keeps making reference cycles, so the cyclic collector runs often and
its generation-2 passes stop every thread, the engine's too, for milliseconds at a time:
the kind of tail a p99 investigation should name. Usage, as `perfkit` takes it:

    python docs/examples/gcpressure.py sweep --concurrency 8 --requests 60 --stacks --stack-rate 200
"""

from __future__ import annotations

import sys
import threading
import time


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None
        self.payload = list(range(32))


def garbage() -> None:
    """Cycles the reference counts cannot free: only the collector can. A large live heap
    (up to 100,000 nodes) makes each generation-2 pass long; the garbage comes in short
    bursts (200 cycles, a fraction of a millisecond) with a 1 ms sleep between them. A
    thread that holds the GIL longer measures GIL contention instead of GC: every
    GIL-releasing call of the engine (torch ops, the compiled decode kernel) then waits
    for the burst to end or the 5 ms switch interval (with 1,000-cycle bursts and a 0.5 ms
    sleep the median TPOT rose from 2.6 to 28-153 ms and a 60-request sweep took 2 min)."""
    keep: list[Node] = []
    while True:
        for _ in range(200):
            a, b = Node(), Node()
            a.other, b.other = b, a
            keep.append(a)
        if len(keep) > 100_000:  # a large heap: gen-2 passes have much to walk
            keep.clear()
        time.sleep(0.001)


if __name__ == "__main__":
    threading.Thread(target=garbage, daemon=True, name="garbage").start()
    from perfkit.cli.main import main

    sys.argv = ["perfkit", *sys.argv[1:]]
    main()
