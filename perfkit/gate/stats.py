"""Intervals for the regression gate: how sure is a change, in the metric's unit, and
the decision it supports (`decide`: regression only when the whole interval is out).

Every interval here is for delta = current - baseline (never a ratio, so a zero
baseline is fine). Two estimators, both at CONFIDENCE (95%, two-sided):

  - percentiles of raw samples: bootstrap, each side resampled on its own;
  - per-repeat values (one number per level and repeat): Welch's t-interval on
    the difference of the repeats' means.

Bootstrapping a percentile without materialising resamples: a resample of n
values drawn with replacement from sorted x is x[floor(U_i * n)] for n uniform
U_i, and that map is monotone, so the resample's m-th smallest value is
x[floor(U_(m) * n)] where the m-th uniform order statistic U_(m) ~ Beta(m, n+1-m).
Given U_(m) = u, the next one is u + (1 - u) * Beta(1, n - m). Each draw costs
O(1) whatever n is, and interpolates between ranks exactly as
`perfkit.summary.latency.percentile` does.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from perfkit.config.schema import GateRule

CONFIDENCE = 0.95  # two-sided; the t table below is for this level
NUM_RESAMPLES = 2000
SEED = 20240601  # fixed: the same inputs always give the same intervals
MIN_TAIL = 5  # samples a side needs beyond a percentile for its interval (p99: 500)
SINGLE_FACTOR = 3.0  # without an interval, only a change beyond 3x the band alarms

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
class Interval:
    """A CONFIDENCE interval for delta = current - baseline, in the metric's unit."""

    low: float
    high: float


def t_critical(df: float) -> float:
    """Two-sided 95% critical value of t with `df` degrees of freedom (rounded down)."""
    if df < 1:
        return _T975[1]
    listed = [k for k in _T975 if k <= df]
    return _T975[max(listed)] if df <= 120 else _Z975


def rng_for(key: str) -> np.random.Generator:
    """A generator seeded by SEED and a stable hash of `key` (level and metric)."""
    return np.random.default_rng([SEED, zlib.crc32(key.encode())])


def bootstrap_percentile(sorted_values: np.ndarray, q: float, rng: np.random.Generator,
                         num: int = NUM_RESAMPLES) -> np.ndarray:
    """`num` draws of the q-th percentile of a resample of `sorted_values` (see above)."""
    n = len(sorted_values)
    rank = q / 100.0 * (n - 1)
    m = math.floor(rank) + 1  # 1-based rank of the lower order statistic
    frac = rank - (m - 1)
    u_low = rng.beta(m, n + 1 - m, size=num)
    low = sorted_values[np.minimum((u_low * n).astype(np.int64), n - 1)]
    if frac == 0.0 or m >= n:
        return low
    u_high = u_low + (1.0 - u_low) * rng.beta(1, n - m, size=num)
    high = sorted_values[np.minimum((u_high * n).astype(np.int64), n - 1)]
    return low + (high - low) * frac


def min_samples(q: float) -> int:
    """Samples a side needs for an interval of the q-th percentile: MIN_TAIL beyond it
    on the short side (p50: 10, p99: 500). A bootstrap of a rarer tail is all noise."""
    return math.ceil(MIN_TAIL / (min(q, 100.0 - q) / 100.0) - 1e-9)


def _multiset_codes(picks: np.ndarray, num_groups: int) -> np.ndarray:
    """One integer per row of sorted picks (base-num_groups digits): a 1-d unique is
    far faster than a row-wise one, which is kept for more repeats than int64 holds."""
    if num_groups > 15:
        return np.unique(picks, axis=0, return_inverse=True)[1].reshape(-1)
    return picks.astype(np.int64) @ (num_groups ** np.arange(num_groups, dtype=np.int64))


def cluster_percentile(repeats: Sequence[Sequence[float]], q: float, rng: np.random.Generator,
                       num: int = NUM_RESAMPLES) -> np.ndarray:
    """`num` draws of the q-th percentile under a two-stage bootstrap: pick the repeats
    with replacement, then resample the pooled samples of the picked ones. Repeats
    that disagree (a run-to-run shift) widen the spread; one repeat degrades to the
    plain bootstrap. Draws are grouped by the multiset of repeats picked, so each
    distinct pool is sorted once (R=3 has 10 of them)."""
    groups = [np.asarray(r, dtype=float) for r in repeats if len(r)]
    picks = np.sort(rng.integers(0, len(groups), size=(num, len(groups))), axis=1)
    _, first, which = np.unique(_multiset_codes(picks, len(groups)), return_index=True,
                                return_inverse=True)
    out = np.empty(num)
    for k, row in enumerate(first):
        rows = np.flatnonzero(which == k)
        pooled = np.sort(np.concatenate([groups[i] for i in picks[row]]))
        out[rows] = bootstrap_percentile(pooled, q, rng, len(rows))
    return out


def percentile_delta(baseline: Sequence[Sequence[float]], current: Sequence[Sequence[float]],
                     q: float, key: str) -> Interval | None:
    """Interval of percentile(current) - percentile(baseline), each side's samples given
    per repeat; None when a side has too few samples to resolve the percentile."""
    if min(sum(map(len, baseline)), sum(map(len, current))) < min_samples(q):
        return None
    rng = rng_for(key)
    base = cluster_percentile(baseline, q, rng)
    cur = cluster_percentile(current, q, rng)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(cur - base, [tail, 100 - tail])
    return Interval(float(low), float(high))


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample variance (ddof=1)."""
    mean = math.fsum(values) / len(values)
    return mean, math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def mean_delta(baseline: Sequence[float], current: Sequence[float]) -> Interval | None:
    """Welch t-interval of mean(current) - mean(baseline); None with < 2 values a side."""
    if min(len(baseline), len(current)) < 2:
        return None
    mb, vb = _mean_var(baseline)
    mc, vc = _mean_var(current)
    sb, sc = vb / len(baseline), vc / len(current)
    se = math.sqrt(sb + sc)
    if se == 0.0:
        return Interval(mc - mb, mc - mb)
    df = (sb + sc) ** 2 / (sb**2 / (len(baseline) - 1) + sc**2 / (len(current) - 1))
    half = t_critical(df) * se
    return Interval(mc - mb - half, mc - mb + half)


# ---- deciding ---------------------------------------------------------------------------


def band_side(delta: float, rule: GateRule, band: float) -> int:
    """+1 when delta lies beyond the band on the good side, -1 on the bad side, else 0."""
    good = -delta if rule.direction == "lower" else delta
    return 1 if good > band else -1 if good < -band else 0


def decide(delta: float, interval: Interval | None, rule: GateRule, band: float
           ) -> Literal["improved", "regression", "within noise"]:
    """Regression or improvement only when the whole interval is beyond the band;
    without an interval, only when the point change is beyond SINGLE_FACTOR bands."""
    if interval is None:
        side = band_side(delta, rule, band * SINGLE_FACTOR)
    else:
        sides = {band_side(interval.low, rule, band), band_side(interval.high, rule, band)}
        side = sides.pop() if len(sides) == 1 else 0
    return "improved" if side > 0 else "regression" if side < 0 else "within noise"
