"""The measurement clock: perf_counter, less the time this process spent paused.

A sweep in lockstep with a peer (perfkit.sweep.lockstep) takes turns with it: while
the peer runs, this process is blocked between two engine steps and does no work.
Those pauses are not latency, so every timestamp a measurement takes (token times,
step times, arrivals, GC pauses, the tail probe) reads `now()`, which stops while
paused and goes on from where it stopped: TTFT, TPOT and E2E are what they would be
alone, measured under the same machine load as the peer's.

Without a turn taker installed `now()` is time.perf_counter() and `between_steps()`
does nothing.

Invariant: now() is monotonic in every thread, pauses included (frozen during one).
"""

from __future__ import annotations

import resource
import time
from typing import Protocol


class TurnTaker(Protocol):
    def take_turns(self) -> bool:
        """Give the turn away if this process has had it long enough and block until it
        comes back: True when it paused, False when it kept on."""

    def barrier(self) -> None:
        """A level starts: wait (in turns) until the peer starts the same level."""


_paused_s = 0.0  # total pause seconds before the one in progress
_frozen_at: float | None = None  # perf_counter when the pause in progress began
_taker: TurnTaker | None = None
# Process CPU (user, system) spent while paused: the sampler threads keep running, and
# a side that waits longer (its peer is slower) would otherwise count more of it.
_paused_cpu = [0.0, 0.0]


def now() -> float:
    """Seconds on the measurement clock (perf_counter less the pauses)."""
    frozen = _frozen_at
    return (time.perf_counter() if frozen is None else frozen) - _paused_s


def paused_s() -> float:
    """Seconds paused so far (pauses completed)."""
    return _paused_s


def paused_cpu_s() -> tuple[float, float]:
    """(user, system) CPU seconds of this process during completed pauses."""
    return _paused_cpu[0], _paused_cpu[1]


def install(taker: TurnTaker | None) -> None:
    """Take turns through `taker` between engine steps; None: run alone again."""
    global _taker
    _taker = taker


def level_starts() -> None:
    """Called before a level's first request: in lockstep, wait for the peer's level."""
    if _taker is not None:
        _taker.barrier()


def between_steps() -> None:
    """Called by the engine loop between two steps: the one place a pause may happen."""
    if _taker is None:
        return
    global _frozen_at, _paused_s
    before = resource.getrusage(resource.RUSAGE_SELF)
    _frozen_at = time.perf_counter()
    if _taker.take_turns():
        after = resource.getrusage(resource.RUSAGE_SELF)
        _paused_cpu[0] += after.ru_utime - before.ru_utime
        _paused_cpu[1] += after.ru_stime - before.ru_stime
        _paused_s += time.perf_counter() - _frozen_at
    _frozen_at = None
