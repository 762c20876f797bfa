"""A fake span source: OTLP/HTTP protobuf payloads built with the opentelemetry-proto
classes directly (not perfkit's encoder), as a server's exporter sends them; and a store
that keeps every span it receives (a collector, for --otlp-export)."""

from __future__ import annotations

import urllib.request
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from perfkit.traces import otlp
from perfkit.traces.store import SpanStore


def _value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=str(v))


def span(trace_id: str, span_id: str, attrs: dict[str, Any], parent: str = "",
         name: str = "llm_request", start_ns: int = 1, end_ns: int = 2) -> Span:
    return Span(trace_id=bytes.fromhex(trace_id), span_id=bytes.fromhex(span_id),
                parent_span_id=bytes.fromhex(parent), name=name, kind=Span.SPAN_KIND_SERVER,
                start_time_unix_nano=start_ns, end_time_unix_nano=end_ns,
                attributes=[KeyValue(key=k, value=_value(v)) for k, v in attrs.items()])


def payload(*spans: Span, service: str = "vllm") -> bytes:
    resource = Resource(attributes=[KeyValue(key="service.name", value=_value(service))])
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=resource, scope_spans=[ScopeSpans(spans=list(spans))])]).SerializeToString()


def post(url: str, body: bytes, content_type: str = "application/x-protobuf",
         encoding: str | None = None) -> int:
    headers = {"Content-Type": content_type} | ({"Content-Encoding": encoding} if encoding
                                                 else {})
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


class KeepAll(SpanStore):
    def __init__(self) -> None:
        super().__init__()
        self.spans: list[otlp.Span] = []

    def add(self, spans: Any) -> None:
        spans = list(spans)
        self.spans += spans
        super().add(spans)
