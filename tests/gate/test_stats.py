"""The paired estimator: log ratios, t-intervals, decisions, detectable change, pairs."""

import math

import pytest

from perfkit.config.schema import GateRule
from perfkit.gate import stats

LOWER = GateRule(direction="lower", rel_tol=0.05, abs_tol=None, required=True)
HIGHER = GateRule(direction="higher", rel_tol=0.05, abs_tol=None, required=True)


def _decide(base, cur, rule=LOWER):
    p = stats.paired(base, cur, stats.scale_for(rule, base + cur))
    return p, stats.decide(p, rule, stats.boundaries(rule, base[0], p.scale))


def test_t_critical_from_the_table():
    assert stats.t_critical(4) == 2.776
    assert stats.t_critical(35) == 2.042  # rounded down to 30
    assert stats.t_critical(500) == 1.960


def test_uniform_ratio_has_a_zero_width_interval_and_is_a_regression():
    p, verdict = _decide([1.0, 2.0, 4.0], [1.1, 2.2, 4.4])
    assert p.scale == "log" and p.sd == pytest.approx(0.0, abs=1e-12)
    assert stats.to_change(p.mean, "log") == pytest.approx(0.10)
    assert verdict == "regression"


def test_drift_shared_by_a_pair_cancels():
    # each pair sits at a different machine speed; the ratio inside a pair is 1.01
    _, verdict = _decide([1.0, 3.0, 0.5, 2.0], [1.01, 3.03, 0.505, 2.02])
    assert verdict == "ok"


def test_interval_maps_back_to_a_possible_change():
    p = stats.paired([1.0, 1.0, 1.0], [0.2, 3.0, 0.5], "log")
    interval = stats.interval(p)
    assert interval is not None and interval.low > -1.0


def test_straddling_the_edge_is_inconclusive_with_the_pairs_that_decide_it():
    p, verdict = _decide([1.0] * 4, [1.0, 1.06, 0.98, 1.04])
    assert verdict == "inconclusive"
    edges = stats.boundaries(LOWER, 1.0, "log")
    needed = stats.pairs_needed(p, LOWER, edges)
    assert needed is None or needed > 4


def test_fewer_than_min_pairs_is_inconclusive():
    p, verdict = _decide([1.0, 1.0], [1.0, 1.0])
    assert p.half is None and verdict == "inconclusive"
    assert stats.detectable(p, LOWER, stats.boundaries(LOWER, 1.0, "log")) is None


def test_higher_is_better_regresses_downward():
    assert _decide([100.0] * 3, [80.0, 81.0, 79.0], HIGHER)[1] == "regression"
    assert _decide([100.0] * 3, [130.0, 131.0, 129.0], HIGHER)[1] == "improved"


def test_detectable_is_the_edge_plus_the_half_width():
    p = stats.paired([1.0] * 5, [1.0, 1.02, 0.98, 1.01, 0.99], "log")
    edges = stats.boundaries(LOWER, 1.0, "log")
    found = stats.detectable(p, LOWER, edges)
    assert p.half is not None and found == pytest.approx(math.log1p(0.05) + p.half)


def test_absolute_band_uses_the_linear_scale():
    rule = GateRule(direction="lower", rel_tol=None, abs_tol=0.05, required=True)
    assert stats.scale_for(rule, [0.01, 0.02]) == "linear"
    assert stats.boundaries(rule, 0.02, "linear") == (-0.05, 0.05)
    assert stats.scale_for(LOWER, [0.0, 1.0]) == "linear"  # a zero: no log
