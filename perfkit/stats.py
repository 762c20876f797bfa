"""The one quantile and the one interval of perfkit: every percentile in a table or a
JSON file, every tail cut (the p99 steps and requests of the tail breakdown), every
bootstrap of the knee and every gate statistic goes through `quantile`; every interval
is an `Interval`.

quantile(values, q), q in [0, 1]: linear interpolation between the closest ranks, numpy's
default method ("linear", Hyndman & Fan type 7) and so what vLLM's `bench serve` reports
(np.percentile). On n sorted values v: rank r = q (n - 1), value = v[floor r] +
(r - floor r) (v[ceil r] - v[floor r]). On 0, 1, ..., 99 it gives p99 = 98.01 and p50 = 49.5.
Why this one: it is what users compare perfkit's figures with, it is continuous in q,
and a value "above p99" means the same thing in the table and in the tail breakdown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def quantile(values: Sequence[float], q: float, *, presorted: bool = False) -> float:
    """The q-quantile (q in [0, 1]) of `values` by linear interpolation (module docstring);
    `presorted`: the values are already in ascending order (no copy, no sort)."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    ordered = values if presorted else sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    below, above = ordered[low], ordered[high]
    value = below + (above - below) * (rank - low)
    return min(max(value, below), above)  # rounding must not leave [below, above]


@dataclass(frozen=True)
class Interval:
    """An interval [low, high] around an estimate: a bootstrap or batch-means interval of
    a measured figure (value: the point estimate), or a confidence interval of a change
    (the gate: value None, the change is reported beside it)."""

    low: float
    high: float
    value: float | None = None
