"""Arrival processes: gamma inter-arrival times with a burstiness factor, ramps of the rate
(open loop) and of the clients (closed loop)."""

from __future__ import annotations

import statistics
from itertools import pairwise

import pytest

from perfkit.client_script import client_starts
from perfkit.config.profile import Overrides, load_profile
from perfkit.config.workload import Arrival
from perfkit.errors import PerfkitError
from perfkit.workload import arrival_times, level_arrivals, ramp_times


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_rate_and_the_burstiness(burstiness):
    times = arrival_times("gamma", 10.0, 20001, seed=3, burstiness=burstiness)
    gaps = [b - a for a, b in pairwise(times)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.1, rel=0.05)
    # a gamma of shape k has coefficient of variation 1 / sqrt(k): 1 is poisson
    assert statistics.pstdev(gaps) / mean == pytest.approx(burstiness ** -0.5, rel=0.08)


def test_gamma_of_shape_one_is_poisson_in_distribution_not_in_draws():
    poisson = arrival_times("poisson", 5.0, 4001, seed=1)
    gamma = arrival_times("gamma", 5.0, 4001, seed=1, burstiness=1.0)
    assert poisson[-1] == pytest.approx(gamma[-1], rel=0.1)


@pytest.mark.parametrize("ramp", ["linear", "exponential"])
def test_a_ramped_rate_grows_then_holds(ramp):
    steady = arrival_times("poisson", 10.0, 3001, seed=2)
    ramped = ramp_times(steady, 10.0, ramp, 20.0)
    assert ramped == sorted(ramped) and len(ramped) == len(steady)
    first, second, after = (sum(lo <= t < hi for t in ramped)
                            for lo, hi in ((0, 10), (10, 20), (20, 30)))
    assert first < second < after  # the rate rises over the ramp
    assert after == pytest.approx(100, rel=0.25)  # then the level's 10/s
    # after the ramp the arrivals are the steady ones, shifted
    lag = ramped[-1] - steady[-1]
    assert ramped[-2] - steady[-2] == pytest.approx(lag)


def test_level_arrivals_follow_the_profile():
    gamma = Arrival(kind="gamma", burstiness=0.5, ramp="linear", ramp_s=5.0)
    times = level_arrivals(gamma, 4.0, 50, seed=0)
    assert times[0] == 0.0 and times == sorted(times)
    assert level_arrivals(Arrival(), 4.0, 3, seed=0) == arrival_times("poisson", 4.0, 3)


def test_clients_start_over_the_ramp():
    assert client_starts(4, "none", 0.0) is None
    assert client_starts(4, "linear", 8.0) == [0.0, 2.0, 4.0, 6.0]
    exp = client_starts(8, "exponential", 6.0)
    assert exp is not None and exp[0] == 0.0 and exp[1] == 2.0 and exp[7] == 6.0


def test_bad_arrival_settings_are_named():
    with pytest.raises(PerfkitError, match="burstiness"):
        load_profile("default", Overrides(sets=("workload.arrival.burstiness=0",)))
    with pytest.raises(PerfkitError, match="ramp_s"):
        load_profile("default", Overrides(sets=('workload.arrival.ramp="linear"',)))
