"""sweep --search: the highest concurrency (or rate) whose goodput meets the profile's SLOs.

Bracketing, then bisection, over the one load axis the profile sweeps:
  1. from the first level, double the load until a level fails (or the cap);
  2. bisect between the highest level that met and the lowest that failed, to one client
     (concurrency) or to 10% (rate);
  3. confirm: the answer runs again (pooled with its earlier runs) and must still meet;
     if it does not, the search bisects below it (at most three rounds).
A level's decision is the share of its measured requests that met every SLO target, with
a 95% Wilson interval: it meets when the whole interval is at or above
`slo.goodput_share`, fails when it is below, and is uncertain otherwise; an uncertain
level runs again (its repeats pooled, up to MAX_RUNS) before it counts as a failure
marked uncertain. Every level tried is a level of the result, in the order it ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.result.search import Decision, SearchResult, SearchStep
from perfkit.result.sweep import SweepResult
from perfkit.run.level_loop import (
    LevelRunner,
    QuietEvents,
    SweepEvents,
    TargetDown,
    TargetOptions,
    TraceOptions,
    check_target,
    conclude,
    level_runner,
)
from perfkit.summary.evidence import contended
from perfkit.sweep.plan import SweepPlan, plan_from_profile
from perfkit.sweep.writer import ResultWriter

MAX_RUNS = 3  # runs pooled to settle an uncertain level
RATE_RESOLUTION = 1.1  # bisection on rate stops when hi / lo is below this
Z95 = 1.959964


def wilson(good: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a binomial share (sound for shares near 0 or 1)."""
    if n == 0:
        return 0.0, 1.0
    p = good / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def decide(levels: list[LevelResult], x: float, target: float) -> SearchStep:
    n = sum(lv.goodput.requests for lv in levels)
    good = sum(lv.goodput.good_requests for lv in levels)
    low, high = wilson(good, n)
    decision: Decision = ("meets" if low >= target else "fails" if high < target
                          else "uncertain")
    return SearchStep(x, len(levels), n, good, good / n if n else None, low, high, decision,
                      any(contended(lv) for lv in levels))


class Search:
    """Runs levels through `run_one`, writing each, until the answer is bracketed."""

    def __init__(self, run_one: Callable[[LoadPoint, int], LevelResult], writer: ResultWriter,
                 axis: str, target: float, stop: Callable[[], bool]) -> None:
        self.run_one, self.writer, self.axis = run_one, writer, axis
        self.target, self.stop = target, stop
        self.steps: list[SearchStep] = []
        self.runs: dict[float, list[LevelResult]] = {}  # every run of a load, pooled
        self.last: dict[float, SearchStep] = {}  # the latest decision at each load

    def point(self, x: float) -> LoadPoint:
        return LoadPoint(concurrency=int(x)) if self.axis == "concurrency" else LoadPoint(rate=x)

    def try_level(self, x: float) -> SearchStep:
        """At least one more run of load x, pooled with its earlier runs; an uncertain
        decision runs again, up to MAX_RUNS new runs."""
        runs = self.runs.setdefault(x, [])
        for new in range(1, MAX_RUNS + 1):
            level = self.run_one(self.point(x), len(runs))
            self.writer.add_level(level)
            check_target(level)
            runs.append(level)
            step = decide(runs, x, self.target)
            if step.decision != "uncertain" or new == MAX_RUNS or self.stop():
                break
        self.steps.append(step)
        self.last[x] = step
        return step

    def bracket(self, start: float, cap: float) -> tuple[float | None, float | None]:
        best, fail, x = None, None, start
        while x <= cap and not self.stop():
            if self.try_level(x).decision == "meets":
                best, x = x, x * 2
            else:
                return best, x
        return best, fail

    def bisect(self, best: float, fail: float) -> tuple[float, float]:
        while not self.stop() and not self._close(best, fail):
            mid = (best + fail) // 2 if self.axis == "concurrency" else math.sqrt(best * fail)
            if self.try_level(mid).decision == "meets":
                best = mid
            else:
                fail = mid
        return best, fail

    def confirm(self, best: float | None, fail: float | None, rounds: int = 3
                ) -> tuple[float | None, float | None]:
        """The answer must hold in a later run too: `best` runs again (pooled with its
        earlier runs); when it no longer meets, it becomes the failing bound and the
        search bisects below it again. Run-to-run drift of the machine is larger than one
        run's binomial interval; this keeps the answer from following it upward."""
        for _ in range(rounds):
            if best is None or self.stop() or self.try_level(best).decision == "meets":
                break
            fail = best
            below = [x for x, s in self.last.items() if s.decision == "meets" and x < fail]
            best = max(below) if below else None
            if best is not None:
                best, fail = self.bisect(best, fail)
        return best, fail

    def bounds(self) -> tuple[float | None, float | None]:
        """(highest load that met, lowest above it that did not) from the decisions so far."""
        met = [x for x, s in self.last.items() if s.decision == "meets"]
        best = max(met) if met else None
        above = [x for x, s in self.last.items()
                 if s.decision != "meets" and (best is None or x > best)]
        return best, (min(above) if above else None)

    def _close(self, best: float, fail: float) -> bool:
        if self.axis == "concurrency":
            return fail - best <= 1
        return fail / best < RATE_RESOLUTION


def sentence(axis: str, best: float | None, fail: float | None, steps: list[SearchStep],
             target: float, slo: str) -> str:
    by_x = {s.x: s for s in steps}

    def shown(x: float) -> str:
        s = by_x[x]
        share = "n/a" if s.share is None else f"{s.share:.0%}"
        note = ", uncertain" if s.decision == "uncertain" else ""
        return f"{x:g} ({share} good [{s.low:.0%}, {s.high:.0%}]{note})"

    what = f"{target:.0%} of requests within {slo}"
    busy = sum(s.contended for s in steps)
    if fail is not None and by_x[fail].decision == "uncertain":
        caveat_n = f" More requests per level (--requests) would decide {fail:g}."
    else:
        caveat_n = ""
    caveat = (f" {busy} of {len(steps)} decisions ran while other processes used the CPU: "
              "the answer may move; rerun on a quiet machine to trust it." if busy else "")
    if best is None:
        head = f"No {axis} tried meets the SLOs ({what})"
        return head + (f": the first, {shown(fail)}, fails." if fail is not None
                       else ".") + caveat_n + caveat
    tail = f"; {shown(fail)} fails" if fail is not None else "; the cap was reached"
    return f"Highest {axis} meeting the SLOs ({what}): {shown(best)}{tail}.{caveat_n}{caveat}"


def run_search(prof: Profile, path: Path | None = None, *, cap: float | None = None,
               target: TargetOptions | None = None, events: SweepEvents | None = None,
               stop: Callable[[], bool] = lambda: False, traces: TraceOptions | None = None
               ) -> SweepResult:
    """The search over the profile's first level's axis, from that level; `traces` as
    run_sweep's."""
    plan = plan_from_profile(prof)
    first = plan.levels[0]
    axis = "concurrency" if first.concurrency is not None else "rate"
    with level_runner(prof, plan, target, traces) as (run, header):
        return _search(prof, path, plan, axis, run, header, cap, events, stop)


def _search(prof: Profile, path: Path | None, plan: SweepPlan, axis: str, run: LevelRunner,
            header: SweepResult, cap: float | None, events: SweepEvents | None,
            stop: Callable[[], bool]) -> SweepResult:
    first = plan.levels[0]
    ev = events or QuietEvents()

    def run_one(point: LoadPoint, repeat: int) -> LevelResult:
        ev.level_started(len(writer.result.levels), 0, point, repeat, plan)  # 0: open-ended
        level = run(point, repeat, ev.request_done)
        ev.level_done(level, None, None)
        return level

    writer = ResultWriter(path, header)
    slo_target = prof.slo.goodput_share
    search = Search(run_one, writer, axis, slo_target, stop)
    limit = cap or (4096.0 if axis == "concurrency" else 1e5)
    try:
        best, fail = search.bracket(first.x, limit)
        if best is not None and fail is not None:
            best, fail = search.bisect(best, fail)
        best, fail = search.confirm(best, fail)
        complete = not stop()
    except KeyboardInterrupt:  # as run_sweep: keep what was decided, complete=False
        best, fail = search.bounds()
        complete = False
    except TargetDown as down:
        best, fail = search.bounds()
        complete = False
        writer.result = replace(writer.result, stop_reason=str(down))
    slo = prof.slo
    targets = {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "e2e_s": slo.e2e_s}
    words = ", ".join(f"{k.removesuffix('_s').upper()} <= {v * 1e3:g} ms"
                      for k, v in targets.items() if v is not None) or "no targets"
    answer = SearchResult(axis, slo_target, targets, best, fail,  # type: ignore[arg-type]
                          sentence(axis, best, fail, search.steps, slo_target, words),
                          search.steps)
    writer.result = replace(writer.result, search=answer)
    return conclude(writer, prof, complete)
