"""The measurement clock: perf_counter, less the time this process spent paused.

A sweep in lockstep with a peer (perfkit.sweep.lockstep) takes turns with it: while
the peer runs, this process is blocked between two engine steps and does no work.
Those pauses are not latency, so every timestamp a measurement takes (token times,
step times, arrivals, GC pauses, the tail probe) reads `now()`, which stops while
paused and goes on from where it stopped: TTFT, TPOT and E2E are what they would be
alone, measured under the same machine load as the peer's.

In lockstep the clock also stops while the engine thread waits in the run queue (it is
runnable and another process holds its core: the second field of its schedstat). The
OS hands such waits to whichever side happens to be running, a few hundred ms to
seconds at a time on a loaded machine, so they would land on one side of a pair and
not the other. The engine takes them out after a step's work and before it stamps the
step's tokens (`reclaim_waits`), never further back than the step's last stamp.

Without a turn taker installed `now()` is time.perf_counter() and `between_steps()`
and `reclaim_waits()` do nothing.

Invariant: now() is monotonic in every thread, pauses included (frozen during one);
in lockstep the engine thread's own stamps stay monotonic across a reclaimed wait
(other threads' stamps taken during the wait may exceed later engine stamps by it).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
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
# The engine thread's cumulative run-queue wait (seconds) and its reading when last
# taken out; None: not in lockstep, or the platform cannot tell.
_waits: Callable[[], float | None] | None = None
_waited_at = 0.0
_reclaimed_s = 0.0  # run-queue wait taken out so far


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


def reclaimed_s() -> float:
    """Seconds of the engine thread's run-queue wait taken out of time so far."""
    return _reclaimed_s


def install(taker: TurnTaker | None, waits: Callable[[], float | None] | None = None) -> None:
    """Take turns through `taker` between engine steps; None: run alone again. `waits`
    reads the engine thread's cumulative run-queue wait: those waits are taken out too."""
    global _taker, _waits
    _taker = taker
    _waits = waits if taker is not None else None
    _restart_waits()


def _restart_waits() -> None:
    """Waits from here on count; those before (a pause, a barrier) are not the step's."""
    global _waited_at
    reading = _waits() if _waits is not None else None
    if reading is not None:
        _waited_at = reading


def level_starts() -> None:
    """Called before a level's first request: in lockstep, wait for the peer's level."""
    if _taker is not None:
        _taker.barrier()
        _restart_waits()


def reclaim_waits(floor: float) -> None:
    """Called by the engine after a step's work, before it stamps the step's tokens:
    the engine thread's run-queue wait since the last call is taken out of time like a
    pause, at most back to `floor` (now() at the step's last stamp), so the engine's
    stamps stay monotonic. A no-op unless in lockstep."""
    global _waited_at, _paused_s, _reclaimed_s
    if _waits is None:
        return
    reading = _waits()
    if reading is None:
        return
    waited, _waited_at = reading - _waited_at, reading
    take = min(waited, now() - floor)
    if take > 0.0:
        _paused_s += take
        _reclaimed_s += take


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
        _restart_waits()  # waking up waits for the core the peer leaves: part of the pause
    _frozen_at = None
