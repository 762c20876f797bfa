"""The engine thread's waits placed in time: inside which steps, behind which holder.

Waits are (start, end) intervals of one thread, so they never overlap each other; sorted
by start, the time inside any window is a bisect and a short walk. Steps and waits are
on perf_counter here (the engine's clock outside lockstep, which --contention refuses).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from perfkit.result.contention import StepGroup
from perfkit.result.tail import step_groups

Interval = tuple[float, float]


class Waits:
    """One thread's waits, sorted and clipped to a window."""

    def __init__(self, intervals: Sequence[Interval]) -> None:
        ordered = sorted((s, e) for s, e in intervals if e > s)
        self.start = [s for s, _ in ordered]
        self.end = [e for _, e in ordered]

    @property
    def total_s(self) -> float:
        return sum(e - s for s, e in zip(self.start, self.end))

    def inside(self, lo: float, hi: float) -> float:
        """Seconds of waiting within [lo, hi]."""
        total = 0.0
        i = max(0, bisect_left(self.end, lo))
        while i < len(self.start) and self.start[i] < hi:
            total += max(0.0, min(hi, self.end[i]) - max(lo, self.start[i]))
            i += 1
        return total

    def count_in(self, lo: float, hi: float) -> int:
        """Waits that overlap [lo, hi]."""
        return max(0, bisect_left(self.start, hi) - bisect_left(self.end, lo))

    def intervals(self) -> list[Interval]:
        return list(zip(self.start, self.end))

    def minus(self, other: Waits) -> Waits:
        """These waits less the time `other` covers (GC pauses out of GIL waits)."""
        out: list[Interval] = []
        for s, e in zip(self.start, self.end):
            cur = s
            j = max(0, bisect_left(other.end, s))
            while j < len(other.start) and other.start[j] < e:
                if other.start[j] > cur:
                    out.append((cur, other.start[j]))
                cur = max(cur, other.end[j])
                j += 1
            if cur < e:
                out.append((cur, e))
        return Waits(out)


def step_waits(starts: Sequence[float], ends: Sequence[float], gil: Waits | None,
               lock: Waits | None) -> list[StepGroup]:
    """All steps, the tail steps (> p99) and the median ones: mean step time and mean
    wait inside a step (None where that wait was not measured)."""
    durations = [e - s for s, e in zip(starts, ends)]
    if not durations:
        return []
    tail, median, _, _ = step_groups(durations)

    def group(which: str, idx: list[int]) -> StepGroup:
        n = max(len(idx), 1)

        def mean(w: Waits | None) -> float | None:
            return None if w is None else sum(w.inside(starts[i], ends[i]) for i in idx) / n

        return StepGroup(which, len(idx), sum(durations[i] for i in idx) / n, mean(gil),
                         mean(lock))

    return [group("all", list(range(len(durations)))), group("tail", tail),
            group("median", median)]
