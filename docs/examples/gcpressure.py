"""Plant GC pressure in perfkit's own process, then run its CLI (README: "Why is my p99 high?").

A daemon thread keeps making reference cycles, so the cyclic collector runs often and
its generation-2 passes stop every thread, the engine's too, for milliseconds at a time:
the kind of tail a p99 investigation should name. Usage, as `perfkit` takes it:

    python docs/examples/gcpressure.py sweep --concurrency 8 --requests 60 --stacks --stack-rate 200
"""

from __future__ import annotations

import sys
import threading


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None
        self.payload = list(range(32))


def garbage() -> None:
    """Cycles the reference counts cannot free: only the collector can."""
    keep: list[Node] = []
    while True:
        a, b = Node(), Node()
        a.other, b.other = b, a
        keep.append(a)
        if len(keep) > 20_000:  # a large young heap: gen-2 passes have much to walk
            keep.clear()


if __name__ == "__main__":
    threading.Thread(target=garbage, daemon=True, name="garbage").start()
    from perfkit.cli.main import main

    sys.argv = ["perfkit", *sys.argv[1:]]
    main()
