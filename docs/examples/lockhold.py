"""Plant a lock the engine's step must take, held by a thread that sleeps while holding it,
in perfkit's own process; then run its CLI (docs/guides/contention.md).

A "metrics" lock guards a counter the engine bumps in every step (as it schedules). A flusher
thread takes the same lock every FLUSH_EVERY_S and, holding it, sleeps HOLD_S (a slow
write done inside the critical section: no CPU, no GIL). The engine thread blocks in the
lock's futex until the flusher lets go. `perfkit sweep --contention` should name it:
lock_contention, the flusher as the holder.

    python docs/examples/lockhold.py sweep --concurrency 4 --requests 40 --contention
    python docs/examples/lockhold.py --control sweep --concurrency 4 --requests 40 --contention

--control copies the counter under the lock and sleeps after releasing it: the same
thread and the same sleeps, a short critical section; no contention finding should fire.
"""

from __future__ import annotations

import sys
import threading
import time

FLUSH_EVERY_S = 0.03
HOLD_S = 0.02  # the slow write, inside the lock unless --control

METRICS_LOCK = threading.Lock()
steps = 0


def flusher(control: bool) -> None:
    while True:
        time.sleep(FLUSH_EVERY_S)
        with METRICS_LOCK:
            seen = steps
            if not control:
                time.sleep(HOLD_S)  # writing `seen` out while holding the lock
        if control:
            time.sleep(HOLD_S)  # writing `seen` out after releasing it
        del seen


def plant_in_step() -> None:
    """Every engine step takes the metrics lock as it schedules (inside the step)."""
    from perfkit.engine.scheduler import Scheduler

    schedule = Scheduler.schedule

    def locked_schedule(self: Scheduler):  # type: ignore[no-untyped-def]
        global steps
        with METRICS_LOCK:
            steps += 1
        return schedule(self)

    Scheduler.schedule = locked_schedule  # type: ignore[method-assign]


if __name__ == "__main__":
    args = sys.argv[1:]
    control = args[:1] == ["--control"]
    args = args[1:] if control else args
    plant_in_step()
    threading.Thread(target=flusher, args=(control,), daemon=True, name="flusher").start()
    from perfkit.cli.main import main

    sys.argv = ["perfkit", *args]
    main()
