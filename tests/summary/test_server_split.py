"""A tail group's window split by the server's spans: the parts add up to the client's
window exactly (TTFT, and TPOT per output token), whatever the timings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfkit.records import RequestRecord
from perfkit.result.server_traces import ServerTiming
from perfkit.summary.server_split import server_split

ms = st.floats(0.0, 2.0)


def pair(i: int, queue: float, prefill: float, api: float, out_ttft: float, decode: float,
         api_end: float, out_end: float, n: int) -> tuple[RequestRecord, ServerTiming]:
    ttft_s = queue + prefill + api
    e2e_s = ttft_s + decode + api_end
    c_ttft, c_e2e = ttft_s + out_ttft, e2e_s + out_ttft + out_end
    rec = RequestRecord(i, 0.0, 8, n, first_token_s=c_ttft, token_times_s=[c_ttft, c_e2e],
                        finish_s=c_e2e, finish_reason="length")
    return rec, ServerTiming(joined_by="trace id", queue_s=queue, prefill_s=prefill,
                             decode_s=decode, ttft_s=ttft_s, e2e_s=e2e_s,
                             outside_ttft_s=c_ttft - ttft_s, outside_e2e_s=c_e2e - e2e_s)


@given(st.lists(st.tuples(ms, ms, ms, ms, ms, ms, ms, st.integers(2, 64)), min_size=1,
                max_size=5))
def test_parts_add_up_to_the_window(rows: list[tuple]) -> None:
    pairs = [pair(i, *row) for i, row in enumerate(rows)]
    recs, timings = [r for r, _ in pairs], {r.request_id: t for r, t in pairs}
    ttft = server_split(recs, "ttft", timings)
    assert ttft is not None and ttft.num_joined == len(rows)
    assert ttft.queue_s + ttft.prefill_s + ttft.outside_engine_s == pytest.approx(  # type: ignore[operator]
        ttft.window_s, abs=1e-9)
    tpot = server_split(recs, "tpot", timings)
    assert tpot is not None and tpot.queue_s is None
    assert tpot.decode_s + tpot.outside_engine_s == pytest.approx(  # type: ignore[operator]
        tpot.window_s, abs=1e-9)


def test_unjoined_and_unreported() -> None:
    rec, _ = pair(1, 0.1, 0.2, 0.0, 0.05, 1.0, 0.0, 0.1, 11)
    assert server_split([rec], "ttft", {}) is None
    bare = ServerTiming(joined_by="request id", queue_s=None, prefill_s=None, decode_s=None,
                        ttft_s=None, e2e_s=0.9, outside_ttft_s=None, outside_e2e_s=0.4)
    split = server_split([rec], "ttft", {1: bare})
    assert split is not None
    assert (split.queue_s, split.prefill_s, split.api_server_s, split.outside_engine_s) == (
        None, None, None, None)
    assert split.window_s == pytest.approx(rec.ttft_s)
