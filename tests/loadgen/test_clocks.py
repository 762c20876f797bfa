"""A worker's clock offset from round trips (perfkit.loadgen.clocks)."""

from __future__ import annotations

import pytest

from perfkit.loadgen.clocks import estimate


def test_the_shortest_round_trip_bounds_the_offset():
    # true offset +5.0 s; the legs: (1 ms out, 3 ms back), (0.2 ms, 0.2 ms), (4 ms, 0.1 ms)
    probes = [(10.0, 15.001, 10.004), (20.0, 25.0002, 20.0004), (30.0, 35.004, 30.0041)]
    est = estimate(probes)
    assert est.round_trip_s == pytest.approx(0.0004)
    assert est.offset_s == pytest.approx(5.0)
    assert est.error_s == pytest.approx(0.0002)


def test_asymmetric_legs_stay_inside_the_bound():
    est = estimate([(0.0, 100.009, 0.010)])  # 9 ms out, 1 ms back; truth +100.0
    assert abs(est.offset_s - 100.0) <= est.error_s


def test_no_probes():
    with pytest.raises(ValueError):
        estimate([])
