"""How many load-generating workers a level gets: `--workers N` as given, or `auto`.

One worker is one event loop on one core. What a loop can drive depends on the server's
pace, which is not known ahead, so `auto` sizes by the load with a wide margin and caps by
the cores this process may use:

  closed loop  ceil(C / CLIENTS_PER_WORKER) workers. Measured here against a server that
               streams a token every 10 ms (the fastest pace of a real server under load),
               one loop at C = 256 spent 0.86 of a core and its TTFT p50 read twice that
               of a multi-process client; at 128 clients a loop stays near half a core.
  open loop    ceil(rate x mean output tokens / CHUNKS_PER_WORKER_S): the chunks a second
               the level will stream at least (each request streams its output).
Never more workers than cores (os.sched_getaffinity), nor than clients, and 1 when one
is enough: the load then runs in perfkit's own process, as without --workers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from perfkit.errors import PerfkitError
from perfkit.result.point import LoadPoint

CLIENTS_PER_WORKER = 128
CHUNKS_PER_WORKER_S = 10_000.0


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class WorkerChoice:
    """--workers as given: a number, or auto (None)."""

    fixed: int | None  # --workers N; None: auto
    cores: int  # usable cores here, or a Ray cluster's CPUs (auto's cap)

    def at(self, point: LoadPoint, mean_output_tokens: float) -> int:
        """Workers for this level."""
        if self.fixed is not None:
            want = self.fixed
        elif point.concurrency is not None:
            want = min(self.cores, math.ceil(point.concurrency / CLIENTS_PER_WORKER))
        else:
            rate = point.rate or 0.0
            want = min(self.cores, math.ceil(rate * mean_output_tokens / CHUNKS_PER_WORKER_S))
        if point.concurrency is not None:
            want = min(want, point.concurrency)  # a worker with no client sends nothing
        return max(1, want)

    def describe(self, n: int) -> str:
        if self.fixed is not None:
            return f"--workers {self.fixed}"
        return (f"auto: {n} ({self.cores} cores here; <= {CLIENTS_PER_WORKER} clients or "
                f"{CHUNKS_PER_WORKER_S:,.0f} chunks/s a worker)")


def parse_workers(text: str | None, cores: int | None = None, default: int | None = 1
                  ) -> WorkerChoice:
    """--workers N|auto; absent: `default` (1: the load in perfkit's own process; None:
    auto). `cores`: auto's cap (default: this process's usable cores)."""
    cores = usable_cores() if cores is None else cores
    if text is None:
        return WorkerChoice(default, cores)
    if text.strip().lower() == "auto":
        return WorkerChoice(None, cores)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise PerfkitError(f"--workers: expected a whole number >= 1 or auto, got {text!r}")
    return WorkerChoice(n, cores)
