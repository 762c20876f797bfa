"""Raw level data -> TailSection: what the p99 requests waited on, next to the median ones.

Everything is on the level's clock (seconds from t0). A request's windows:

    arrival ── scheduled ── first token ─────────── finish
    |<-queue->|<-own prefill->|                            TTFT window
                              |<------ decode ------->|    TPOT window

Steps inside a window are attributed to it: in the TTFT window they are the request's own
prefill steps (shared with another request's prefill chunk: interference); in the TPOT
window every step that carries a prefill chunk is another request's prefill (or its own
recompute after a preemption). GC pauses, run-queue wait and page faults are the rise of
the process-wide timelines over the window (the GIL makes any thread's pause everyone's).
GIL and lock waits are the engine thread's (with --contention: result/contention.py)
inside the window; GIL waits leave out the GC pauses they overlap (a collecting thread
holds the GIL: that time is the GC cause's), so the two never count the same time.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol

from perfkit.records import RequestRecord
from perfkit.result.contention import ContentionSection
from perfkit.result.tail import (
    CAUSES,
    TAIL_Q,
    StepTail,
    TailCause,
    TailGroup,
    TailSection,
    step_groups,
)
from perfkit.stats import quantile
from perfkit.summary.contention_time import Waits


class ProbeTimelines(Protocol):
    """What stacks.probe.ProbeData holds (perf_counter times; cumulative counters)."""

    gc_start_s: list[float]
    gc_end_s: list[float]
    tick_s: list[float]
    run_delay_s: list[float]
    faults: list[int]
    counters_reason: str


MEDIAN_LO, MEDIAN_HI = 0.40, 0.60


@dataclass(frozen=True)
class Steps:
    """The level's steps on its clock, sorted by start."""

    start_s: list[float]
    end_s: list[float]
    prefill_seqs: list[int]  # sequences prefilling in the step

    @cached_property
    def decode_s(self) -> float:
        """Median duration of the steps without a prefill chunk (0.0 when none ran)."""
        plain = sorted(e - s for s, e, n in zip(self.start_s, self.end_s, self.prefill_seqs)
                       if n == 0)
        return plain[len(plain) // 2] if plain else 0.0

    def excess(self, i: int) -> float:
        """What step i took beyond a decode-only step: the time its prefill chunks cost."""
        return max(0.0, self.end_s[i] - self.start_s[i] - self.decode_s)

    def inside(self, lo: float, hi: float) -> range:
        """Steps that start in [lo, hi) (a token is stamped before its step ends)."""
        return range(bisect_left(self.start_s, lo), bisect_left(self.start_s, hi))


@dataclass(frozen=True)
class Timelines:
    gc_start_s: list[float]
    gc_end_s: list[float]
    tick_s: list[float]
    run_delay_s: list[float]
    faults: list[int]
    gil: Waits | None = None  # the engine thread's GIL waits, GC pauses taken out
    lock: Waits | None = None  # its lock waits

    def gc_in(self, lo: float, hi: float) -> tuple[int, float]:
        first = bisect_left(self.gc_end_s, lo)
        n, total = 0, 0.0
        for i in range(first, bisect_left(self.gc_start_s, hi)):
            n += 1
            total += min(hi, self.gc_end_s[i]) - max(lo, self.gc_start_s[i])
        return n, max(total, 0.0)

    def rise(self, series: Sequence[float], lo: float, hi: float) -> float | None:
        """Counter rise between the last tick at or before lo and the first after hi."""
        if not self.tick_s:
            return None
        a = max(0, bisect_right(self.tick_s, lo) - 1)
        b = min(len(self.tick_s) - 1, bisect_left(self.tick_s, hi))
        return float(series[b] - series[a])


def _window(rec: RequestRecord, metric: str) -> tuple[float, float] | None:
    if metric == "ttft":
        return None if rec.first_token_s is None else (rec.arrival_s, rec.first_token_s)
    if rec.first_token_s is None or rec.finish_s is None or rec.tpot_s is None:
        return None
    return rec.first_token_s, rec.finish_s


def _causes(rec: RequestRecord, metric: str, steps: Steps, lines: Timelines
            ) -> dict[str, tuple[float | None, float | None]]:
    lo, hi = _window(rec, metric) or (0.0, 0.0)
    out: dict[str, tuple[float | None, float | None]] = {c: (0.0, 0.0) for c in CAUSES}
    start = rec.scheduled_s if rec.scheduled_s is not None else lo
    if metric == "ttft":
        out["queue"] = (1.0 if start > lo else 0.0, start - lo)
        own = steps.inside(start, hi)
        out["own_prefill"] = (float(len(own)), hi - start)
        shared = [i for i in own if steps.prefill_seqs[i] > 1]
    else:
        shared = [i for i in steps.inside(lo, hi) if steps.prefill_seqs[i] > 0]
    out["prefill_interference"] = (float(len(shared)), sum(steps.excess(i) for i in shared))
    out["preemption"] = (float(rec.num_preemptions), None)
    out["gc"] = tuple(map(float, lines.gc_in(lo, hi)))  # type: ignore[assignment]
    delay, faults = lines.rise(lines.run_delay_s, lo, hi), lines.rise(lines.faults, lo, hi)
    out["run_queue"] = (0.0, delay)
    out["page_faults"] = (faults or 0.0, None)
    for name, waits in (("gil", lines.gil), ("lock", lines.lock)):
        out[name] = (None, None) if waits is None else \
            (float(waits.count_in(lo, hi)), waits.inside(lo, hi))
    return out


def _group(recs: list[RequestRecord], metric: str, which: str, threshold: float,
           steps: Steps, lines: Timelines, start_end_s: float) -> TailGroup:
    sums = {c: [0.0, 0.0] for c in CAUSES}
    timed = {c: False for c in CAUSES}
    counted = {c: False for c in CAUSES}
    window, in_window, prompt = 0.0, 0, 0
    for rec in recs:
        prompt += rec.prompt_tokens - rec.cached_tokens
        lo, hi = _window(rec, metric) or (0.0, 0.0)
        scale = _per_token(rec, hi - lo) if metric == "tpot" else 1.0
        window += (hi - lo) * scale
        first = rec.scheduled_s if metric == "ttft" and rec.scheduled_s is not None else lo
        in_window += len(steps.inside(first, hi))
        for cause, (count, secs) in _causes(rec, metric, steps, lines).items():
            if count is not None:
                sums[cause][0] += count
                counted[cause] = True
            if secs is not None:
                sums[cause][1] += secs * scale
                timed[cause] = True
    n = max(len(recs), 1)
    causes = [TailCause(c, sums[c][0] / n if counted[c] or not recs else None,
                        sums[c][1] / n if timed[c] else None) for c in CAUSES]
    at_start = sum(1 for r in recs if r.arrival_s < start_end_s)
    return TailGroup(metric, which, threshold, len(recs), window / n, causes,
                     steps=in_window / n, at_start=at_start, prompt_tokens=prompt / n)


def _per_token(rec: RequestRecord, window_s: float) -> float:
    """A TPOT window's seconds -> seconds per decode interval (its TPOT over its window):
    a tail-TPOT request with few tokens can have a shorter window than a median one, so
    TPOT groups compare per output token, not whole windows."""
    return (rec.tpot_s or 0.0) / window_s if window_s > 0 else 0.0


def _metric(rec: RequestRecord, metric: str) -> float | None:
    return rec.ttft_s if metric == "ttft" else rec.tpot_s


def _start_end(records: list[RequestRecord], measured: list[RequestRecord]) -> float:
    """The measured phase's start ends at its first finish (a warm-up one still running
    counts): until then no arrival was paced by a finish, and a closed loop's first
    arrivals came all at once (the warm-up requests have finished before it)."""
    first = min((r.arrival_s for r in measured), default=0.0)
    return min((r.finish_s for r in records if r.finish_s is not None and r.finish_s > first),
               default=first)


def request_groups(records: list[RequestRecord], steps: Steps, lines: Timelines
                   ) -> list[TailGroup]:
    groups = []
    measured = [r for r in records if not r.warmup and r.completed]
    start_end = _start_end(records, measured)
    for metric in ("ttft", "tpot"):
        pairs = [(v, r) for r in measured if (v := _metric(r, metric)) is not None]
        if not pairs:
            continue
        values = [v for v, _ in pairs]
        p99, lo, hi = (quantile(values, q) for q in (TAIL_Q, MEDIAN_LO, MEDIAN_HI))
        tail = [r for v, r in pairs if v >= p99]
        median = [r for v, r in pairs if lo <= v <= hi]
        groups.append(_group(tail, metric, "tail", p99, steps, lines, start_end))
        groups.append(_group(median, metric, "median", quantile(values, 0.5), steps, lines,
                             start_end))
    return groups


def _step_tail(steps: Steps, lines: Timelines) -> StepTail | None:
    durations = [e - s for s, e in zip(steps.start_s, steps.end_s)]
    if not durations:
        return None
    tail, median, p50, p99 = step_groups(durations)

    def share(idx: list[int], test: Callable[[int], bool]) -> float:
        return sum(1 for i in idx if test(i)) / len(idx) if idx else 0.0

    def prefill(i: int) -> bool:
        return steps.prefill_seqs[i] > 0

    def gc(i: int) -> bool:
        return lines.gc_in(steps.start_s[i], steps.end_s[i])[0] > 0

    return StepTail(len(durations), p50, p99, len(tail), share(tail, prefill),
                    share(median, prefill), share(tail, gc), share(median, gc))


NO_CONTENTION = "not measured (run the sweep with --contention)"


def _waits(lines: Timelines, sec: ContentionSection | None) -> tuple[Timelines, str]:
    """The engine's GIL waits less the GC pauses, its lock waits; or why not measured."""
    if sec is None:
        return lines, NO_CONTENTION
    gc = Waits(list(zip(lines.gc_start_s, lines.gc_end_s)))
    gil = None if "gil_wait" in sec.unavailable else Waits(sec.gil_s).minus(gc)
    lock = None if "lock_wait" in sec.unavailable else Waits(sec.lock_s)
    why = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sec.unavailable.items()
                    if k in ("gil_wait", "lock_wait"))
    return replace(lines, gil=gil, lock=lock), why


def tail_section(records: list[RequestRecord], step_start_s: list[float],
                 step_end_s: list[float], step_prefill_seqs: list[int], probe: ProbeTimelines,
                 t0_s: float, contention: ContentionSection | None = None) -> TailSection:
    """Engine step lists and probe timelines are on perf_counter; records on t0's clock
    (so are `contention`'s wait intervals)."""
    steps = Steps([s - t0_s for s in step_start_s], [e - t0_s for e in step_end_s],
                  list(step_prefill_seqs))
    lines = Timelines([s - t0_s for s in probe.gc_start_s], [e - t0_s for e in probe.gc_end_s],
                      [t - t0_s for t in probe.tick_s], probe.run_delay_s, probe.faults)
    lines, waits_reason = _waits(lines, contention)
    return TailSection(steps=_step_tail(steps, lines),
                       groups=request_groups(records, steps, lines),
                       counters_reason=probe.counters_reason, waits_reason=waits_reason,
                       step_start_s=list(step_start_s), step_end_s=list(step_end_s), t0_s=t0_s)
