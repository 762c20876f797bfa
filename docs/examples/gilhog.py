"""Plant a GIL hog in perfkit's own process, then run its CLI (docs/guides/contention.md).

A daemon thread does pure-Python work in bursts (BURST_S of arithmetic, then a SLEEP_S
rest): while it runs it holds the GIL, so every time the engine thread releases the GIL
(each torch op does) it may have to wait up to the 5 ms switch interval to get it back.
`perfkit sweep --contention` should name it: gil_contention, the hog as the holder.

    python docs/examples/gilhog.py sweep --concurrency 4 --requests 40 --contention
    python docs/examples/gilhog.py --control sweep --concurrency 4 --requests 40 --contention

--control runs the same bursts in another process (multiprocessing): the same CPU load
beside perfkit, no GIL shared; no contention finding should fire.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time

BURST_S = 0.02  # pure-Python work per burst: the GIL is held throughout
SLEEP_S = 0.01


def bursts() -> None:
    while True:
        end = time.perf_counter() + BURST_S
        while time.perf_counter() < end:
            sum(i * i for i in range(200))
        time.sleep(SLEEP_S)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--control"]:
        args = args[1:]
        multiprocessing.Process(target=bursts, daemon=True, name="gilhog-elsewhere").start()
    else:
        threading.Thread(target=bursts, daemon=True, name="gilhog").start()
    from perfkit.cli.main import main

    sys.argv = ["perfkit", *args]
    main()
