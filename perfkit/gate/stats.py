"""Paired statistics for the regression gate: interleaved runs, compared pair by pair.

Run i of the baseline is paired with run i of the current side (the order they were
taken: interleaved A/B, the sequential form of duet benchmarking). Each pair gives one
difference d_i; machine drift that hits both runs of a pair alike cancels in d_i, and
whatever does not cancel shows up as the spread of the d_i. The change is the mean of
the d_i with a Student t-interval (CONFIDENCE, k - 1 degrees of freedom):

  log scale     d_i = log(current_i / baseline_i): ratios, so an interval maps back
                to a change in (-100%, +inf) and never to an impossible one;
  linear scale  d_i = current_i - baseline_i, for metrics gated by an absolute band
                (a share near 0) or with a value <= 0.

A decision compares the interval with the band's boundary on the bad side:
regression when the whole interval is beyond it, ok when the whole interval is short
of it, improved when it is wholly beyond the good side's boundary, and otherwise
inconclusive: this data cannot tell whether the change exceeds the tolerance. The
smallest change the data could have called a regression is the boundary plus the
interval's half-width ("detectable"); the pairs that would decide an inconclusive row
follow from the pairs' spread.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from perfkit.config.schema import GateRule
from perfkit.stats import Interval

CONFIDENCE = 0.95  # two-sided; the t table below is for this level
MIN_PAIRS = 3  # fewer paired runs: no interval (t with 1 df is 12.7: useless anyway)
MAX_PAIRS_ASKED = 100  # "needs more than this many pairs" beyond it
MATCH_SHARE = 0.9  # matched medians: at least this share of each run's requests in common
K = TypeVar("K", bound=Hashable)

Scale = Literal["log", "linear"]
Decision = Literal["ok", "improved", "regression", "inconclusive"]

# Two-sided 95% critical values of Student's t (0.975 quantile) by degrees of
# freedom, from the standard tables; between listed df the smaller df is used.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
    9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131,
    16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074,
    23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045,
    30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}
_Z975 = 1.960


@dataclass(frozen=True)
class Paired:
    """The paired differences of one metric at one level, summarised."""

    scale: Scale
    pairs: int  # k, usable pairs
    mean: float  # mean of d_i (log of a ratio, or the unit)
    sd: float  # sample standard deviation of d_i; 0.0 with one pair
    half: float | None  # t * sd / sqrt(k); None with fewer than MIN_PAIRS pairs


def t_critical(df: float) -> float:
    """Two-sided 95% critical value of t with `df` degrees of freedom (rounded down)."""
    if df < 1:
        return _T975[1]
    listed = [k for k in _T975 if k <= df]
    return _T975[max(listed)] if df <= 120 else _Z975


def scale_for(rule: GateRule, values: Sequence[float]) -> Scale:
    """Log scale for a relative band over positive values; linear otherwise."""
    return "log" if rule.rel_tol and all(v > 0 for v in values) else "linear"


def paired(base: Sequence[float], cur: Sequence[float], scale: Scale) -> Paired:
    """Summary of the pairs (base[i], cur[i]); both sequences have k >= 1 values."""
    if scale == "log":
        diffs = [math.log(c / b) for b, c in zip(base, cur)]
    else:
        diffs = [c - b for b, c in zip(base, cur)]
    return summarise(diffs, scale)


def matched_diff(base: dict[K, float], cur: dict[K, float]) -> float | None:
    """One pair of runs as the median per-request log ratio over the requests both ran
    (same key: the same work); None when fewer than MATCH_SHARE of either run match."""
    common = base.keys() & cur.keys()
    if not common or len(common) < MATCH_SHARE * max(len(base), len(cur)):
        return None
    return statistics.median(math.log(cur[k] / base[k]) for k in common)


def summarise(diffs: Sequence[float], scale: Scale) -> Paired:
    """The t-interval of the mean of k >= 1 paired differences."""
    k = len(diffs)
    mean = math.fsum(diffs) / k
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (k - 1)) if k > 1 else 0.0
    half = t_critical(k - 1) * sd / math.sqrt(k) if k >= MIN_PAIRS else None
    return Paired(scale, k, mean, sd, half)


# ---- the band in the difference's scale ---------------------------------------------------


def boundaries(rule: GateRule, baseline: float, scale: Scale) -> tuple[float, float]:
    """(down, up): the band around no change in d's scale. A relative band r is
    [log(1 - r), log(1 + r)]; abs_tol widens it where it is the larger one."""
    if scale == "linear":
        band = max((rule.rel_tol or 0.0) * abs(baseline), rule.abs_tol or 0.0)
        return -band, band
    rel = max(rule.rel_tol or 0.0, (rule.abs_tol or 0.0) / abs(baseline) if baseline else 0.0)
    return (math.log1p(-rel) if rel < 1 else -math.inf), math.log1p(rel)


def _bad_edge(rule: GateRule, edges: tuple[float, float]) -> float:
    return edges[1] if rule.direction == "lower" else edges[0]


def decide(p: Paired, rule: GateRule, edges: tuple[float, float]) -> Decision:
    """See the module docstring; no interval (too few pairs) is inconclusive."""
    if p.half is None:
        return "inconclusive"
    low, high = p.mean - p.half, p.mean + p.half
    down, up = edges
    if rule.direction == "lower":
        return ("regression" if low > up else "improved" if high < down
                else "ok" if high <= up else "inconclusive")
    return ("regression" if high < down else "improved" if low > up
            else "ok" if low >= down else "inconclusive")


def detectable(p: Paired, rule: GateRule, edges: tuple[float, float]) -> float | None:
    """The smallest change in the bad direction this data would call a regression, in
    d's scale: the band's bad edge pushed out by the half-width."""
    if p.half is None:
        return None
    edge = _bad_edge(rule, edges)
    return edge + p.half if rule.direction == "lower" else edge - p.half


def pairs_needed(p: Paired, rule: GateRule, edges: tuple[float, float]) -> int | None:
    """Pairs with the same spread that would decide this row (an interval clear of the
    bad edge); None: more than MAX_PAIRS_ASKED, or the mean sits on the edge."""
    if p.pairs < 2:
        return MIN_PAIRS
    margin = abs(_bad_edge(rule, edges) - p.mean)
    if p.sd == 0.0:
        return max(p.pairs, MIN_PAIRS)
    for k in range(max(p.pairs, MIN_PAIRS), MAX_PAIRS_ASKED + 1):
        if t_critical(k - 1) * p.sd / math.sqrt(k) < margin:
            return k
    return None


def to_change(d: float, scale: Scale) -> float:
    """A value in d's scale as a change: a fraction of the baseline on the log scale."""
    if scale == "log":
        return math.expm1(d) if d != -math.inf else -1.0
    return d


def interval(p: Paired) -> Interval | None:
    if p.half is None:
        return None
    return Interval(to_change(p.mean - p.half, p.scale), to_change(p.mean + p.half, p.scale))


def band_side(delta: float, rule: GateRule, band: float) -> int:
    """+1 when delta lies beyond the band on the good side, -1 on the bad side, else 0."""
    good = -delta if rule.direction == "lower" else delta
    return 1 if good > band else -1 if good < -band else 0
