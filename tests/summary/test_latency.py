import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfkit.records import RequestRecord
from perfkit.result.codec import to_json
from perfkit.summary.latency import (
    distribution,
    goodput,
    level_counts,
    level_latency,
    measured_records,
    measured_window,
    meets_slo,
    throughput,
    warmup_end,
)


@dataclass
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None


def rec(rid: int, arrival_s: float, ttft_s: float = 0.1, tpot_s: float = 0.01,
        output_tokens: int = 5, **kw: object) -> RequestRecord:
    """A served request with evenly spaced tokens, finishing at its last token."""
    times = [arrival_s + ttft_s + i * tpot_s for i in range(output_tokens)]
    fields: dict[str, object] = dict(
        first_token_s=times[0] if times else None, token_times_s=times,
        finish_s=times[-1] if times else arrival_s + ttft_s, scheduled_s=arrival_s,
        finish_reason="length",
    )
    fields.update(kw)
    return RequestRecord(request_id=rid, arrival_s=arrival_s, prompt_tokens=10,
                         output_tokens=output_tokens, **fields)  # type: ignore[arg-type]


# ---- distribution ------------------------------------------------------------------


def test_distribution_hand_computed() -> None:
    d = distribution([4.0, 1.0, 3.0, 2.0])
    assert d.count == 4
    assert d.p50 == pytest.approx(2.5)
    assert d.p90 == pytest.approx(3.7)  # rank 0.9 * 3 = 2.7 -> 3 + 0.7
    assert d.p99 == pytest.approx(3.97)
    assert (d.min, d.max) == (1.0, 4.0)
    assert d.mean == pytest.approx(2.5)
    assert d.stddev == pytest.approx(math.sqrt(1.25))


def test_distribution_single_and_empty() -> None:
    one = distribution([0.3])
    assert (one.p50, one.p99, one.max, one.stddev) == (0.3, 0.3, 0.3, 0.0)
    empty = distribution([])
    assert empty.count == 0
    assert all(v is None for k, v in to_json(empty).items() if k not in ("count", "quantiles"))
    assert empty.quantiles == {}


def test_distribution_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        distribution([1.0, math.nan])


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=50))
def test_distribution_ordered_and_matches_numpy(values: list[float]) -> None:
    d = distribution(values)
    assert d.min is not None and d.max is not None and d.mean is not None
    assert d.p50 is not None and d.p90 is not None and d.p99 is not None
    assert d.min <= d.p50 <= d.p90 <= d.p99 <= d.max
    assert d.min <= d.mean <= d.max
    expect = np.percentile(values, [50, 90, 99])
    assert [d.p50, d.p90, d.p99] == pytest.approx(list(expect), rel=1e-9, abs=1e-6)


# ---- warm-up exclusion -------------------------------------------------------------


def test_warmup_flag_and_overlap_are_excluded() -> None:
    records = [
        rec(0, 0.0, warmup=True),  # last seen at 0.14
        rec(1, 0.0, warmup=True, ttft_s=0.5, tpot_s=0.25, output_tokens=3),  # ends at 1.0
        rec(2, 0.5),  # arrived during warm-up: overlaps it, excluded
        rec(3, 1.0),  # arrived exactly at the end: measured
        rec(4, 2.0),
    ]
    assert warmup_end(records) == 1.0
    assert [r.request_id for r in measured_records(records)] == [3, 4]
    assert level_counts(records).warmup_excluded == 3
    assert level_latency(records).ttft.count == 2


def test_warmup_end_override_and_no_warmup() -> None:
    records = [rec(0, 0.0), rec(1, 1.0), rec(2, 2.0)]
    assert warmup_end(records) is None
    assert len(measured_records(records)) == 3
    assert [r.request_id for r in measured_records(records, warmup_end_s=1.5)] == [2]


def test_unfinished_warmup_uses_last_seen_time() -> None:
    stuck = RequestRecord(request_id=0, arrival_s=0.0, prompt_tokens=4, output_tokens=2,
                          warmup=True, token_times_s=[0.5, 2.0])
    assert warmup_end([stuck, rec(1, 1.0), rec(2, 2.5)]) == 2.0


# ---- latency summary ---------------------------------------------------------------


def test_level_latency_definitions() -> None:
    records = [
        rec(1, 0.0, ttft_s=0.2, tpot_s=0.05, output_tokens=3),
        rec(2, 1.0, ttft_s=0.4, tpot_s=0.1, output_tokens=2, scheduled_s=1.3),
        rec(3, 2.0, ttft_s=0.1, output_tokens=1),  # no TPOT, no ITL
        rec(4, 3.0, ttft_s=0.3, finish_reason="cancelled"),  # TTFT/ITL yes, E2E/TPOT no
        rec(5, 4.0, rejected="queue-full", finish_reason=None),  # nothing
    ]
    lat = level_latency(records)
    assert lat.ttft.count == 4
    assert lat.ttft.max == pytest.approx(0.4)
    assert lat.tpot.count == 2
    assert (lat.tpot.min, lat.tpot.max) == pytest.approx((0.05, 0.1))
    assert lat.itl.count == 2 + 1 + 4  # gaps pooled over served requests
    assert lat.e2e.count == 3
    assert lat.e2e.max == pytest.approx(0.5)
    assert lat.queue.max == pytest.approx(0.3)
    assert to_json(lat)["ttft"]["count"] == 4


def test_empty_inputs() -> None:
    assert level_latency([]).ttft.count == 0
    assert level_counts([]).requests == 0
    assert measured_window([]) is None
    empty = throughput([])
    assert empty.window_s is None and empty.requests_per_s is None
    g = goodput([], Slo(ttft_s=1.0))
    assert (g.requests, g.good_requests, g.share, g.good_per_s) == (0, 0, None, None)


# ---- throughput, goodput, counts ---------------------------------------------------


def test_throughput_over_measured_window() -> None:
    records = [
        rec(0, 0.0, warmup=True, ttft_s=0.5, tpot_s=0.0, output_tokens=1),  # ends at 0.5
        rec(1, 1.0, ttft_s=0.5, tpot_s=0.5, output_tokens=4),  # finishes 3.0
        rec(2, 2.0, ttft_s=0.5, tpot_s=0.5, output_tokens=6),  # finishes 5.0
        rec(3, 2.5, rejected="too-long", output_tokens=0, finish_s=2.5),
    ]
    assert measured_window(records) == (1.0, 5.0)
    tp = throughput(records)
    assert tp.window_s == pytest.approx(4.0)
    assert tp.requests_per_s == pytest.approx(2 / 4)
    assert tp.output_tokens_per_s == pytest.approx(10 / 4)
    assert tp.total_tokens_per_s == pytest.approx((10 + 20) / 4)
    assert throughput(records, window_s=10.0).output_tokens_per_s == pytest.approx(1.0)
    with pytest.raises(ValueError, match="window_s"):
        throughput(records, window_s=0.0)


def test_goodput_counts_requests_meeting_every_target() -> None:
    records = [
        rec(1, 0.0, ttft_s=0.1, tpot_s=0.01),  # good
        rec(2, 1.0, ttft_s=0.9, tpot_s=0.01),  # TTFT too slow
        rec(3, 2.0, ttft_s=0.1, tpot_s=0.5),  # TPOT too slow
        rec(4, 3.0, ttft_s=0.1, output_tokens=1),  # no TPOT: meets it trivially
        rec(5, 4.0, ttft_s=0.1, finish_reason="error"),  # failed
        rec(6, 5.0, rejected="queue-full", finish_reason=None),  # rejected
    ]
    slo = Slo(ttft_s=0.5, tpot_s=0.1)
    assert [meets_slo(r, slo) for r in records] == [True, False, False, True, False, False]
    g = goodput(records, slo, window_s=2.0)
    assert (g.requests, g.good_requests) == (6, 2)
    assert g.share == pytest.approx(2 / 6)
    assert g.good_per_s == pytest.approx(1.0)
    assert goodput(records, Slo()).good_requests == 4  # no targets: every completed request
    assert goodput(records, Slo(e2e_s=0.1)).good_requests == 0


def test_level_counts() -> None:
    records = [
        rec(0, 0.0, warmup=True),
        rec(1, 1.0, num_preemptions=2, cached_tokens=4),
        rec(2, 2.0, finish_reason="stop", num_preemptions=1),
        rec(3, 3.0, finish_reason="cancelled"),
        rec(4, 4.0, finish_reason=None, finish_s=None),
        rec(5, 5.0, rejected="queue-full", finish_reason=None, output_tokens=0),
        rec(6, 6.0, rejected="queue-full", finish_reason=None, output_tokens=0),
        rec(7, 7.0, rejected="too-long", finish_reason=None, output_tokens=0),
    ]
    c = level_counts(records)
    assert c.requests == 7 and c.completed == 2 and c.warmup_excluded == 1
    assert c.rejected == {"queue-full": 2, "too-long": 1}
    assert c.finish_reasons == {"length": 1, "stop": 1, "cancelled": 1, "unfinished": 1}
    assert (c.preemptions, c.cached_tokens) == (3, 4)
    assert (c.prompt_tokens, c.output_tokens) == (40, 20)
    # Integers only; what a client-side count cannot know (engine steps) is None.
    assert all(isinstance(v, int) for v in to_json(c).values()
               if not isinstance(v, dict) and v is not None)
