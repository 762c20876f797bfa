"""Find the knee of a sweep: the first load level past which more load stops paying.

Each level i is compared with a reference level j < i (below). Level i is the knee
when, first in x order, either holds:
  - throughput-plateau: throughput grows less than `min_gain_per_doubling` (10%)
    per doubling of x, gain per doubling = (T_i / T_j) ** (1 / log2(x_i / x_j)) - 1,
    so steps that are not doublings are normalized by log2 of their x ratio;
  - latency-superlinear: P99 TTFT or P99 TPOT grows faster than x, i.e. more than
    2 * (1 + latency_margin) per doubling (the margin keeps noise from tripping it).
Both at once gives reason "both".

Noise guard: the reference j is the nearest earlier level at least `min_span`
(sqrt 2, half a doubling) below x_i, else the first level. Normalizing a short
step raises its noise to a high power; over half a doubling or more, +/-3% noise
moves a per-doubling ratio by at most (1.03 / 0.97) ** 2, about 13%, so a linear
curve's 2x never reads as the plateau's 1.1x.

Uncertainty: a point may carry intervals (throughput_lo/hi, ttft_lo/hi, tpot_lo/hi;
see summary/intervals.py). A step is a knee only when the whole interval agrees: the
most favourable gain (point.hi / ref.lo) is still under the threshold, or the least
latency growth (point.lo / ref.hi) is still superlinear. When the point estimates say
"knee" but the intervals do not, and no later step is sure, the verdict is
"undecided" and says what would decide it. Points without intervals are exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from perfkit.result.sweep import Knee, KneeReason


@dataclass
class LevelPoint:
    x: float  # load level: concurrency or request rate, > 0
    throughput: float  # at this level, in the caller's unit (e.g. output tok/s)
    p99_ttft_s: float | None = None  # the latency judged (quantile: `latency_q`)
    p99_tpot_s: float | None = None
    throughput_lo: float | None = None  # interval; None = exact
    throughput_hi: float | None = None
    ttft_lo: float | None = None
    ttft_hi: float | None = None
    tpot_lo: float | None = None
    tpot_hi: float | None = None
    latency_q: str = "P99"  # which quantile the latencies are, for the sentence

    def bounds(self, name: str) -> tuple[float | None, float | None, float | None]:
        """(lo, value, hi) of "throughput", "TTFT" or "TPOT"."""
        if name == "throughput":
            v: float | None = self.throughput
            lo, hi = self.throughput_lo, self.throughput_hi
        elif name == "TTFT":
            v, lo, hi = self.p99_ttft_s, self.ttft_lo, self.ttft_hi
        else:
            v, lo, hi = self.p99_tpot_s, self.tpot_lo, self.tpot_hi
        return (v if lo is None else lo), v, (v if hi is None else hi)


@dataclass
class _Step:
    ref: LevelPoint  # the level this one is compared with
    point: LevelPoint
    gain: float | None  # throughput gain per doubling; None if the reference had none
    latency: tuple[str, float] | None  # (metric, raw ratio) of a superlinear P99 latency
    gain_hi: float | None = None  # the most favourable gain the intervals allow
    latency_sure: bool = False  # superlinear even at the intervals' least growth


def _reference(points: Sequence[LevelPoint], i: int, min_span: float) -> int:
    for j in range(i - 1, -1, -1):
        if points[i].x / points[j].x >= min_span:
            return j
    return 0


def _gain(ref: LevelPoint, point: LevelPoint, doublings: float) -> float | None:
    if ref.throughput <= 0:
        return None
    ratio = max(point.throughput, 0.0) / ref.throughput
    return float(ratio ** (1 / doublings) - 1)


def _superlinear(
    ref: LevelPoint, point: LevelPoint, doublings: float, margin: float
) -> tuple[tuple[str, float] | None, bool]:
    """The fastest-growing latency whose growth per doubling exceeds 2 * (1 + margin), and
    whether some latency does so even between the intervals' near ends."""
    worst: tuple[str, float] | None = None
    sure = False
    for name in ("TTFT", "TPOT"):
        _, before, before_hi = ref.bounds(name)
        after_lo, after, _ = point.bounds(name)
        if before is None or after is None or before <= 0:
            continue
        ratio, limit = after / before, 2 * (1 + margin)
        if ratio ** (1 / doublings) > limit and (worst is None or ratio > worst[1]):
            worst = (name, ratio)
        if before_hi and after_lo is not None and (after_lo / before_hi) ** (1 / doublings) > limit:
            sure = True
    return worst, sure


def _steps(points: Sequence[LevelPoint], min_span: float, margin: float) -> list[_Step]:
    steps = []
    for i in range(1, len(points)):
        ref, point = points[_reference(points, i, min_span)], points[i]
        doublings = math.log2(point.x / ref.x)
        latency, sure = _superlinear(ref, point, doublings, margin)
        ref_lo, _, _ = ref.bounds("throughput")
        _, _, hi = point.bounds("throughput")
        optimistic = LevelPoint(point.x, hi or 0.0)
        gain_hi = _gain(LevelPoint(ref.x, ref_lo or 0.0), optimistic, doublings)
        steps.append(_Step(ref, point, _gain(ref, point, doublings), latency, gain_hi, sure))
    return steps


def _check(points: Sequence[LevelPoint]) -> None:
    for before, after in pairwise(points):
        if not after.x > before.x:
            raise ValueError(f"levels must be sorted by x, strictly increasing: "
                             f"{before.x}, {after.x}")
    if points and not points[0].x > 0:
        raise ValueError(f"levels must be > 0, got {points[0].x}")


def find_knee(
    points: Sequence[LevelPoint],
    x_name: str = "concurrency",
    unit: str = "tok/s",
    min_gain_per_doubling: float = 0.10,
    latency_margin: float = 0.10,
    min_span: float = math.sqrt(2),
) -> Knee:
    """The first level where throughput plateaus or P99 latency grows faster than x."""
    _check(points)
    if len(points) < 2:
        sentence = f"Need at least 2 levels to find a knee; got {len(points)}."
        return Knee(None, "too-few-levels", sentence, [None] * len(points))
    steps = _steps(points, min_span, latency_margin)
    gains: list[float | None] = [None, *(s.gain for s in steps)]
    words = _Words(x_name, unit, min_gain_per_doubling)
    unsure: _Step | None = None
    for step in steps:
        plateau = step.gain is not None and step.gain < min_gain_per_doubling
        sure_plateau = plateau and step.gain_hi is not None and \
            step.gain_hi < min_gain_per_doubling
        latency = step.latency if step.latency_sure else None
        if sure_plateau or latency:
            reason: KneeReason = (
                "both" if sure_plateau and latency
                else "throughput-plateau" if sure_plateau else "latency-superlinear"
            )
            step.latency = latency
            return Knee(step.point.x, reason, words.knee(step, sure_plateau), gains)
        if (plateau or step.latency) and unsure is None:
            unsure = step
    if unsure is not None:
        return Knee(None, "undecided", words.undecided(unsure), gains)
    return Knee(None, "none", words.no_knee(steps[-1]), gains)


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _pct(share: float, sign: bool = True) -> str:
    return f"{share * 100:+.0f}%" if sign else f"{share * 100:.0f}%"


@dataclass
class _Words:
    x_name: str  # "concurrency" or "rate"
    unit: str  # throughput unit
    min_gain: float  # the plateau threshold, per doubling

    def knee(self, step: _Step, plateau: bool) -> str:
        if plateau:
            latency = self._latency(step, ", while") if step.latency else ""
            return f"{self._plateau(step)}{latency}."
        gain = "" if step.gain is None else f" {_pct(step.gain)} per doubling"
        return (f"Latency grows faster than load at {self.x_name} {step.point.x:g}:"
                f"{self._latency(step, '')}, while throughput still gains{gain}"
                f" ({_num(step.point.throughput)} {self.unit}).")

    def no_knee(self, last: _Step) -> str:
        head = f"No knee up to {self.x_name} {last.point.x:g}"
        if last.gain is None:
            return head + "."
        return f"{head}: throughput still grows {_pct(last.gain, sign=False)} per doubling."

    def undecided(self, step: _Step) -> str:
        what = (f"throughput stops growing ({_pct(step.gain)} per doubling, but up to "
                f"{_pct(step.gain_hi or 0.0)} within the noise)" if step.gain is not None
                and step.gain < self.min_gain else
                f"latency grows faster than load ({self._latency(step, '').strip()}, within "
                "the noise)")
        return (f"Cannot tell whether there is a knee at {self.x_name} {step.point.x:g}: "
                f"{what}. More data would decide it: --repeats 3, or longer levels "
                "(sweep.min_requests_per_client, sweep.min_level_s).")

    def _plateau(self, step: _Step) -> str:
        ref, point = step.ref, step.point
        change = point.throughput / ref.throughput - 1
        doubling = abs(math.log2(point.x / ref.x) - 1) < 0.01
        limit = _pct(self.min_gain, sign=False)
        per = (f"under {limit} per doubling" if doubling
               else f"{_pct(step.gain or 0.0)} per doubling, under {limit}")
        return (f"Throughput stops growing at {self.x_name} {point.x:g}: "
                f"{_num(point.throughput)} {self.unit}, {_pct(change)} "
                f"from {ref.x:g} -> {point.x:g} ({per})")

    def _latency(self, step: _Step, joiner: str) -> str:
        assert step.latency is not None
        metric, ratio = step.latency
        x_ratio = step.point.x / step.ref.x
        q = step.point.latency_q
        return f"{joiner} {q} {metric} grows {ratio:.1f}x for {x_ratio:.3g}x {self.x_name}"
