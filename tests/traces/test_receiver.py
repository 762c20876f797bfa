"""The OTLP/HTTP receiver: what a server's exporter posts lands in the store (plain and
gzip), what is not OTLP protobuf is refused and counted with its reason, an OTLP gRPC
exporter is recognised, and a real OpenTelemetry SDK exporter, given the context of
perfkit's traceparent as vLLM gives it, produces a span joined by trace id."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator

import pytest
from span_source import payload, post, span

from perfkit.errors import PerfkitError
from perfkit.traces.context import client_span_id, new_trace_id, traceparent
from perfkit.traces.receiver import Receiver, parse_address

TRACE = "12" * 16


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver("127.0.0.1", 0).start()
    yield r
    r.stop()


def _url(r: Receiver) -> str:
    return f"http://{r.address}/v1/traces"


def test_spans_plain_and_gzip_land_in_the_store(receiver: Receiver) -> None:
    body = payload(span(TRACE, "01" * 8, {"gen_ai.request.id": "cmpl-a-0"}),
                   span("34" * 16, "02" * 8, {"code.function": "load"}, name="startup"))
    assert post(_url(receiver), body) == 200
    assert post(_url(receiver), gzip.compress(payload(span("56" * 16, "03" * 8, {
        "gen_ai.latency.e2e": 0.1}))), encoding="gzip") == 200
    store = receiver.store
    assert (store.request_spans, store.other_spans, store.bad_payloads) == (2, 1, 0)
    assert store.take(TRACE, None) is not None and store.take(TRACE, None) is None


def test_refused_payloads_say_why(receiver: Receiver) -> None:
    assert post(_url(receiver), b'{"resourceSpans": []}', "application/json") == 415
    assert "OTLP JSON" in receiver.store.last_error
    assert post(_url(receiver), b"\xff\xff garbage") == 400
    assert receiver.store.bad_payloads == 2 and receiver.store.request_spans == 0


def test_a_grpc_exporter_is_recognised(receiver: Receiver) -> None:
    with socket.create_connection((receiver.host, receiver.port), timeout=5) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        s.recv(100)
    assert receiver.store.grpc_attempts == 1


def test_real_sdk_exporter_with_perfkits_context(receiver: Receiver) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=_url(receiver))))
    trace_id = new_trace_id()
    # as vLLM's OutputProcessor.do_tracing: the request's headers give the parent context
    ctx = TraceContextTextMapPropagator().extract({"traceparent": traceparent(trace_id)})
    sp = provider.get_tracer("test").start_span("llm_request", context=ctx, kind=SpanKind.SERVER)
    sp.set_attributes({"gen_ai.request.id": "cmpl-z-0", "gen_ai.latency.e2e": 0.5,
                       "gen_ai.latency.time_in_queue": 0.1})
    sp.end()
    provider.shutdown()
    got = receiver.store.take(trace_id, None)
    assert got is not None
    assert got[1] == "trace id" and got[0].parent_span_id == client_span_id(trace_id)
    assert got[0].attributes["gen_ai.latency.time_in_queue"] == 0.1


@pytest.mark.parametrize(("text", "want"), [("4318", ("127.0.0.1", 4318)),
                                            ("0.0.0.0:4318", ("0.0.0.0", 4318)),
                                            ("[::1]:4318", ("::1", 4318))])
def test_parse_address(text: str, want: tuple[str, int]) -> None:
    assert parse_address(text) == want


@pytest.mark.parametrize("text", ["", "abc", "host:", ":4318", "70000", "0"])
def test_parse_address_refuses(text: str) -> None:
    with pytest.raises(PerfkitError, match=r"--server-traces: expected \[HOST:\]PORT"):
        parse_address(text)


def test_port_in_use_is_one_line(receiver: Receiver) -> None:
    with pytest.raises(PerfkitError, match=r"cannot listen on 127\.0\.0\.1"):
        Receiver("127.0.0.1", receiver.port)


def test_ipv6_loopback() -> None:
    try:
        r = Receiver("::1", 0).start()
    except PerfkitError:
        pytest.skip("no IPv6 loopback here")
    try:
        assert post(f"http://[::1]:{r.port}/v1/traces", payload(span(TRACE, "01" * 8, {
            "gen_ai.latency.e2e": 0.1}))) == 200
        assert r.store.request_spans == 1
    finally:
        r.stop()
