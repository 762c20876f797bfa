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
    """Cycles the reference counts cannot free: only the collector can. In bursts with a
    short sleep between them: a thread that never sleeps holds the GIL whenever it can,
    and on an idle machine every GIL-releasing torch call of the engine then waits up to
    the 5 ms switch interval to get it back (GIL contention, not GC: a step took ~0.5 s)."""
    keep: list[Node] = []
    while True:
        for _ in range(1000):
            a, b = Node(), Node()
            a.other, b.other = b, a
            keep.append(a)
        if len(keep) > 20_000:  # a large young heap: gen-2 passes have much to walk
            keep.clear()
        time.sleep(0.0005)


if __name__ == "__main__":
    threading.Thread(target=garbage, daemon=True, name="garbage").start()
    from perfkit.cli.main import main

    sys.argv = ["perfkit", *sys.argv[1:]]
    main()
