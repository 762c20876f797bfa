"""The gate's statistics: the bootstrap, Welch's interval, the decision."""

import numpy as np
import pytest

from perfkit.config.schema import GateRule
from perfkit.gate.stats import (
    Interval,
    bootstrap_percentile,
    decide,
    mean_delta,
    min_samples,
    percentile_delta,
)

# ---- statistics ---------------------------------------------------------------------------


def test_bootstrap_percentile_matches_plain_resampling():
    x = np.sort(np.random.default_rng(1).lognormal(0, 0.5, 60))
    fast = bootstrap_percentile(x, 90, np.random.default_rng(2), 40000)
    slow = np.percentile(x[np.random.default_rng(3).integers(0, 60, (8000, 60))], 90, axis=1)
    assert np.percentile(fast, [5, 50, 95]) == pytest.approx(np.percentile(slow, [5, 50, 95]),
                                                           rel=0.02)


def test_percentile_interval_is_seeded_and_needs_tail_samples():
    a, b = [[float(i) for i in range(100)]], [[float(i) + 5 for i in range(100)]]
    first = percentile_delta(a, b, 50, "k")
    assert first == percentile_delta(a, b, 50, "k")
    assert first.low < 5 < first.high
    assert percentile_delta(a, b, 99, "k") is None  # 100 < 500
    assert (min_samples(50), min_samples(90), min_samples(99)) == (10, 50, 500)


def test_welch_interval_known_values():
    interval = mean_delta([10.0, 11.0, 12.0], [13.0, 14.0, 15.0])
    half = 2.776 * (2 / 3) ** 0.5  # df 4
    assert (interval.low, interval.high) == pytest.approx((3 - half, 3 + half))
    assert mean_delta([1.0], [2.0, 3.0]) is None
    assert mean_delta([5.0, 5.0], [6.0, 6.0]) == Interval(1.0, 1.0)


@pytest.mark.parametrize(("direction", "interval", "verdict"), [
    ("lower", (0.11, 0.3), "regression"), ("lower", (0.05, 0.3), "within noise"),
    ("lower", (-0.3, -0.11), "improved"), ("higher", (-0.3, -0.11), "regression"),
    ("higher", (0.11, 0.2), "improved"), ("lower", (-0.05, 0.05), "within noise"),
])
def test_decide_needs_the_whole_interval_beyond_the_band(direction, interval, verdict):
    rule = GateRule(direction=direction)
    assert decide(0.2, Interval(*interval), rule, 0.1) == verdict
