"""The join after a level: by trace id, by the server's request id (vLLM's "-N" suffix),
spans that come late within the wait, what stays unjoined and why, and the level's counts."""

from __future__ import annotations

import pytest

from perfkit.records import RequestRecord
from perfkit.traces.join import join_level
from perfkit.traces.otlp import Span
from perfkit.traces.store import SpanStore


def rec(i: int, trace: str | None = None, rid: str | None = None, warmup: bool = False,
        e2e: float = 1.0) -> RequestRecord:
    t0 = -5.0 if warmup else 0.0  # warm-up requests end before the measured ones arrive
    return RequestRecord(i, t0, 8, 4, first_token_s=t0 + 0.2,
                         token_times_s=[t0 + x for x in (0.2, 0.4, 0.6, e2e)],
                         finish_s=t0 + e2e, finish_reason="length", warmup=warmup,
                         trace_id=trace, response_id=rid)


def vspan(trace: str, rid: str = "", e2e: float = 0.9, queue: float = 0.05) -> Span:
    attrs: dict = {"gen_ai.latency.e2e": e2e, "gen_ai.latency.time_in_queue": queue,
                   "gen_ai.latency.time_in_model_prefill": 0.1,
                   "gen_ai.latency.time_in_model_decode": 0.7,
                   "gen_ai.latency.time_to_first_token": 0.18}
    if rid:
        attrs["gen_ai.request.id"] = rid
    return Span(trace, "aa" * 8, "llm_request", 1, 2, attributes=attrs)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.later: list[tuple[float, Span]] = []  # spans that arrive at a time
        self.store = SpanStore()

    def __call__(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += dt
        due = [s for at, s in self.later if at <= self.t]
        self.later = [(at, s) for at, s in self.later if at > self.t]
        self.store.add(due)


@pytest.mark.parametrize(("rid", "server_id"), [("cmpl-abc", "cmpl-abc-0"),
                                                ("chatcmpl-abc", "chatcmpl-abc"),
                                                ("chatcmpl-abc", "chatcmpl-abc_1")])
def test_request_id_join_without_context(rid: str, server_id: str) -> None:
    store = SpanStore()
    store.add([vspan("11" * 16, server_id)])  # the server started a trace of its own
    out = join_level([rec(1, "22" * 16, rid)], store, "r:1", wait_s=0)
    assert out.timings[1].joined_by == "request id"
    assert out.section.by_request_id == 1 and out.section.joined == 1


def test_a_different_id_does_not_join() -> None:
    store = SpanStore()
    store.add([vspan("11" * 16, "cmpl-abcd-0")])
    out = join_level([rec(1, "22" * 16, "cmpl-abc")], store, "r:1", wait_s=0)
    assert not out.timings and not out.section.available


def test_late_spans_within_the_wait_and_what_stays_unjoined() -> None:
    clock = Clock()
    recs = [rec(i, f"{i:032x}") for i in range(1, 21)] + [rec(99, "99" * 16, warmup=True)]
    clock.store.add([vspan(f"{i:032x}") for i in range(1, 11)] + [vspan("99" * 16)])
    clock.later = [(2.0, vspan(f"{i:032x}")) for i in range(11, 20)]  # 20 never comes
    out = join_level(recs, clock.store, "127.0.0.1:4318", wait_s=5.0, clock=clock,
                     sleep=clock.sleep)
    sec = out.section
    assert (sec.requests, sec.joined, sec.by_trace_id) == (20, 19, 19)
    assert sec.wait_s == pytest.approx(5.0, abs=0.06)
    assert "1 of 20 requests not joined after waiting 5.0 s" in sec.reason
    assert 99 not in out.timings and clock.store.take("99" * 16, None) is None  # dropped
    t = out.timings[1]
    assert t.outside_e2e_s == pytest.approx(0.1) and t.outside_ttft_s == pytest.approx(0.02)
    assert sec.api_server is not None and sec.api_server.p50 == pytest.approx(0.05)


def test_stops_waiting_once_all_joined() -> None:
    clock = Clock()
    clock.later = [(0.5, vspan("01" * 16))]
    out = join_level([rec(1, "01" * 16)], clock.store, "r:1", wait_s=10.0, clock=clock,
                     sleep=clock.sleep)
    assert out.section.joined == 1 and out.section.wait_s is not None
    assert out.section.wait_s < 1.0


def test_server_longer_than_client_is_counted() -> None:
    store = SpanStore()
    store.add([vspan("01" * 16, e2e=1.5)])
    assert join_level([rec(1, "01" * 16)], store, "r:1", wait_s=0).section.over_client_e2e == 1


@pytest.mark.parametrize(("setup", "words"), [
    (lambda s: None, "no request span arrived at r:1"),
    (lambda s: s.refused("an OTLP gRPC exporter connected (HTTP/2)", grpc=True),
     "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf"),
    (lambda s: s.refused("Content-Type application/json"), "1 exports refused"),
    (lambda s: s.add([vspan("77" * 16)]), "too late or for other requests")])
def test_nothing_joined_says_why(setup, words: str) -> None:
    store = SpanStore()
    setup(store)
    sec = join_level([rec(1, "01" * 16)], store, "r:1", wait_s=0).section
    assert not sec.available and sec.requests == 1 and words in sec.reason


def test_the_store_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import perfkit.traces.store as store_mod

    monkeypatch.setattr(store_mod, "MAX_KEPT", 10)
    store = SpanStore()
    store.add([vspan(f"{i:032x}", f"cmpl-{i}-0") for i in range(1, 12)])
    assert store.dropped == 5
    assert store.take(f"{1:032x}", "cmpl-1") is None  # the oldest went first
    assert store.take(None, "cmpl-11") is not None
