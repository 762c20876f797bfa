"""What the probes cost: the same calls timed before the tracer attaches and after.

Loops run in the calling thread (the engine's), each the smallest of up to ROUNDS rounds
of CALLS calls within BUDGET_S, so a round the scheduler (or a GIL holder) interrupted
does not count:
- a plain syscall (os.getppid): the raw_syscalls tracepoints' cost;
- a futex syscall (FUTEX_WAKE on a word nobody waits on) through ctypes.PyDLL, which keeps
  the GIL: that plus the futex tracepoints';
- with the GIL uprobes only, a C call through ctypes.CDLL that releases and retakes the
  GIL (libc `labs`): one take_gil/drop_gil pair (behind a GIL hog each call can wait for
  the 5 ms switch interval: the budget bounds it).
Each probe's cost per hit is the traced time less the untraced one (never below 0); the
untraced times are the machine's and measured once per process. The level's cost is
those times the probes' hit counts in the engine thread.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from perfkit.measure import syscall_names

CALLS = 100
ROUNDS = 5
BUDGET_S = 0.05  # per loop
_FUTEX_WAKE_PRIVATE = 1 | 128


@dataclass(frozen=True)
class CallTimes:
    gil_pair_s: float  # one GIL release and retake (a ctypes call); 0.0 when not timed
    syscall_s: float  # one syscall that keeps the GIL
    futex_s: float  # one futex syscall, the GIL kept (syscall + futex)


@dataclass(frozen=True)
class ProbeCost:
    gil_pair_s: float  # added to each take_gil/drop_gil pair
    syscall_s: float  # added to each syscall (raw_syscalls enter + exit)
    futex_s: float  # added to each futex syscall beyond the above


def _per_call(fn: Callable[[], object]) -> float:
    best, end = float("inf"), time.perf_counter() + BUDGET_S
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(CALLS):
            fn()
        best = min(best, (time.perf_counter() - t) / CALLS)
        if time.perf_counter() > end:
            break
    return best


_untraced: dict[bool, CallTimes | None] = {}  # the machine's, once per process


def call_times(gil: bool = False) -> CallTimes | None:
    """None where ctypes cannot reach libc (not Linux); gil_pair_s is 0.0 unless `gil`."""
    try:
        labs, syscall = ctypes.CDLL(None).labs, ctypes.PyDLL(None).syscall
    except (OSError, AttributeError):
        return None
    nr = syscall_names.number("futex")
    word = ctypes.c_int(0)
    addr = ctypes.addressof(word)

    def futex() -> object:
        return syscall(nr, ctypes.c_void_p(addr), _FUTEX_WAKE_PRIVATE, 1, 0, 0, 0)

    return CallTimes(_per_call(lambda: labs(-1)) if gil else 0.0, _per_call(os.getppid),
                     _per_call(futex) if nr is not None else 0.0)


def untraced_times(gil: bool = False) -> CallTimes | None:
    if gil not in _untraced:
        _untraced[gil] = call_times(gil)
    return _untraced[gil]


class Marker:
    """A futex word of this process that only perfkit wakes: the tracer dumps its totals
    when it sees the wake (the measured phase starts)."""

    def __init__(self) -> None:
        self.word = ctypes.c_int(0)
        self.address = ctypes.addressof(self.word)
        self._nr = syscall_names.number("futex")

    def wake(self) -> None:
        try:
            libc = ctypes.PyDLL(None)  # keeps the GIL: no wait behind a GIL hog
            if self._nr is not None:
                libc.syscall(self._nr, ctypes.c_void_p(self.address), _FUTEX_WAKE_PRIVATE,
                             1, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def probe_cost(before: CallTimes | None, after: CallTimes | None) -> ProbeCost | None:
    if before is None or after is None:
        return None
    gil = max(0.0, after.gil_pair_s - before.gil_pair_s)
    sys_ = max(0.0, after.syscall_s - before.syscall_s)
    futex = max(0.0, after.futex_s - before.futex_s - sys_)
    return ProbeCost(gil, sys_, futex)
