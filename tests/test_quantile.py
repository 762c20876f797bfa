"""perfkit.stats: the one quantile (numpy's linear interpolation, as vLLM's bench reports)
and the one Interval; the table, the knee and the tail breakdown pick the same p99
requests because they all go through it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfkit.records import RequestRecord
from perfkit.stacks.probe import ProbeData
from perfkit.stats import Interval, quantile
from perfkit.summary.intervals import latency_interval
from perfkit.summary.latency import distribution
from perfkit.summary.tail_breakdown import tail_section


def test_the_issue_s_example_and_the_bounds() -> None:
    values = [float(v) for v in range(100)]
    assert quantile(values, 0.99) == pytest.approx(98.01)
    assert quantile(values, 0.5) == 49.5
    assert quantile([2.0, 1.0], 0.0) == 1.0 and quantile([2.0, 1.0], 1.0) == 2.0
    with pytest.raises(ValueError):
        quantile([1.0], 1.01)
    with pytest.raises(ValueError):
        quantile([], 0.5)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=60), st.floats(min_value=0.0, max_value=1.0))
def test_quantile_is_numpy_s_linear_and_stays_between_neighbours(values: list[float],
                                                                  q: float) -> None:
    got = quantile(values, q)
    assert got == pytest.approx(float(np.quantile(values, q)), rel=1e-9, abs=1e-6)
    assert min(values) <= got <= max(values)
    assert quantile(sorted(values), q, presorted=True) == got


def test_interval_fields() -> None:
    assert Interval(1.0, 2.0) == Interval(low=1.0, high=2.0, value=None)
    assert Interval(1.0, 3.0, 2.0).value == 2.0


def _records(ttfts: list[float]) -> list[RequestRecord]:
    return [RequestRecord(i, arrival_s=0.0, prompt_tokens=4, output_tokens=5,
                          first_token_s=t, finish_s=t + 0.04, scheduled_s=0.0)
            for i, t in enumerate(ttfts)]


@pytest.mark.parametrize("n", [100, 250, 1000])
def test_table_knee_and_tail_pick_the_same_p99_requests(n: int) -> None:
    rng = np.random.default_rng(n)
    ttfts = [float(x) for x in rng.lognormal(-4.0, 0.5, n)]
    table_p99 = distribution(ttfts).p99
    interval = latency_interval(ttfts, 0.99)
    assert interval is not None and table_p99 is not None
    assert interval.value == table_p99  # the knee's point estimate is the table's p99
    starts = [i * 0.001 for i in range(2000)]
    sec = tail_section(_records(ttfts), starts, [s + 0.0009 for s in starts], [0] * 2000,
                       ProbeData(), 0.0)
    tail = sec.group("ttft", "tail")
    assert tail is not None and tail.threshold_s == table_p99
    assert tail.num_requests == sum(t >= table_p99 for t in ttfts)
