"""Tokens per chunk and burst delivery of a remote level (perfkit.remote.stream)."""

from __future__ import annotations

from perfkit.records import RequestRecord
from perfkit.remote.stream import stream_stats


def rec(rid: int, times: list[float], tokens: int, warmup: bool = False) -> RequestRecord:
    r = RequestRecord(request_id=rid, arrival_s=0.0, prompt_tokens=4, output_tokens=tokens,
                      warmup=warmup)
    r.token_times_s, r.finish_reason = times, "length"
    return r


def test_one_token_per_chunk_labels_itl_as_token_gaps() -> None:
    st = stream_stats([rec(0, [0.1, 0.2, 0.3], 3), rec(1, [0.1, 0.15], 2)])
    assert (st.chunks, st.output_tokens, st.tokens_per_chunk) == (5, 5, 1.0)
    assert st.itl_unit == "token" and st.burst_requests == 0 and not st.degenerate


def test_whole_responses_in_one_burst_make_the_level_degenerate() -> None:
    burst = [rec(i, [0.5, 0.50001, 0.50002], 8) for i in range(3)]
    st = stream_stats([*burst, rec(3, [0.1, 0.3], 2), rec(9, [0.1], 5, warmup=True)])
    assert st.itl_unit == "chunk" and st.tokens_per_chunk == 26 / 11
    assert st.burst_requests == 3 and st.burst_share == 0.75 and st.degenerate


def test_no_completed_requests() -> None:
    st = stream_stats([])
    assert st.tokens_per_chunk is None and st.burst_share is None and not st.degenerate
