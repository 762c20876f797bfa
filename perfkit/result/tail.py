"""Where the slowest requests' time went (in-process levels): the tail breakdown.

For the requests at or above the level's p99 TTFT (their window: arrival -> first token)
and p99 TPOT (first token -> finish), and for the median requests of each, every cause
as a mean per request: a count and the seconds it took of the window. Causes overlap
(a GC pause can fall in a step that carries a prefill chunk): each is measured on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfkit.stats import quantile

CAUSES = ("queue", "own_prefill", "prefill_interference", "preemption", "gc",
          "run_queue", "page_faults", "gil", "lock")


@dataclass(frozen=True)
class TailCause:
    cause: str  # one of CAUSES
    # mean per request: steps, pauses, preemptions, faults or waits (see cause); None:
    # not measured (GIL and lock waits without --contention; a result written before)
    count: float | None
    seconds: float | None  # mean per request; None where a cause has no time (faults)


@dataclass(frozen=True)
class TailGroup:
    metric: str  # "ttft" or "tpot"
    which: str  # "tail" (>= p99) or "median" (p40..p60)
    threshold_s: float  # the metric's p99 (tail) or p50 (median)
    num_requests: int
    # mean window per request (TTFT: arrival->first); TPOT: first->finish per decode
    # interval (the requests' mean TPOT), and its causes' seconds per decode interval too
    window_s: float
    causes: list[TailCause] = field(default_factory=list)  # in CAUSES order
    # mean steps per request in the window: TTFT its own prefill steps (scheduled ->
    # first token), TPOT its decode steps (first token -> finish)
    steps: float = 0.0
    # requests of the group that arrived at the level's start: before any request of the
    # level finished (a closed loop's first `concurrency` arrivals, all at once)
    at_start: int = 0
    # mean prompt tokens per request that its own prefill computed (prompt less the
    # prefix-cache hit): the work behind the TTFT window's own prefill
    prompt_tokens: float = 0.0

    def cause(self, name: str) -> TailCause:
        """The cause by name; not measured (None, None) where the result has none."""
        return next((c for c in self.causes if c.cause == name), TailCause(name, None, None))


@dataclass(frozen=True)
class StepTail:
    num_steps: int
    p50_s: float  # step duration percentiles
    p99_s: float
    num_tail_steps: int  # steps slower than p99 (at least the slowest one)
    tail_prefill_share: float  # of tail steps, those carrying prefill chunks, 0..1
    median_prefill_share: float  # the same for the median steps (p45..p55)
    tail_gc_share: float  # of tail steps, those overlapping a GC pause
    median_gc_share: float


@dataclass(frozen=True, kw_only=True)
class TailSection:
    steps: StepTail | None  # None: no step ran
    groups: list[TailGroup] = field(default_factory=list)
    counters_reason: str = ""  # run queue and faults unavailable: why; "" when measured
    # GIL and lock waits (the engine thread's, from --contention) unavailable: why; ""
    # when measured. The GIL cause leaves out GC pauses (the collector holds the GIL).
    waits_reason: str = ""
    # The step timeline on the level's clock, for cutting the tail stacks; not in JSON.
    step_start_s: list[float] = field(default_factory=list, metadata={"json": False})
    step_end_s: list[float] = field(default_factory=list, metadata={"json": False})
    t0_s: float = field(default=0.0, metadata={"json": False})  # perf_counter of 0

    def group(self, metric: str, which: str) -> TailGroup | None:
        return next((g for g in self.groups if g.metric == metric and g.which == which), None)


TAIL_Q = 0.99  # tail steps and requests: slower than this quantile


def step_groups(durations: list[float]) -> tuple[list[int], list[int], float, float]:
    """(tail step indices: slower than p99, at least the slowest; median: p45..p55; p50, p99)."""
    p50, p99 = quantile(durations, 0.5), quantile(durations, TAIL_Q)
    tail = [i for i, d in enumerate(durations) if d > p99]
    if not tail:
        tail = [max(range(len(durations)), key=durations.__getitem__)]
    lo, hi = quantile(durations, 0.45), quantile(durations, 0.55)
    median = [i for i, d in enumerate(durations) if lo <= d <= hi]
    return tail, median, p50, p99
