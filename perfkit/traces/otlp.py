"""The OTLP wire format (OpenTelemetry protocol, protobuf), both ways, through the
`opentelemetry-proto` package (the optional extra `perfkit[traces]`; imported only here and
only when used, so the base install never needs it).

    ExportTraceServiceRequest
      resource_spans[]: resource (attributes: service.name, ...)
        scope_spans[]: scope (name, version)
          spans[]: trace_id (16 bytes), span_id (8), parent_span_id, name, kind,
                   start/end_time_unix_nano, attributes[] (key, AnyValue)

Ids are hex strings here (lower case), as in a traceparent header.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from perfkit.errors import PerfkitError

EXTRA = "pip install 'perfkit[traces]'"
AttrValue = str | bool | int | float
PROTOBUF_TYPE = "application/x-protobuf"  # OTLP/HTTP's body
SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, SPAN_KIND_CLIENT = 1, 2, 3


@dataclass(frozen=True)
class Span:
    """One span, received or to send."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    name: str
    start_unix_ns: int
    end_unix_ns: int
    parent_span_id: str = ""  # "" for a root span
    kind: int = SPAN_KIND_INTERNAL
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    service: str | None = None  # the resource's service.name


def require(option: str) -> None:
    """PerfkitError (exit 2) naming the extra when the wire format is not installed."""
    try:
        _pb()
    except ImportError:
        raise PerfkitError(f"{option} needs the OpenTelemetry wire format: {EXTRA} "
                           "(the opentelemetry-proto package)") from None


def _pb() -> Any:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    return trace_service_pb2


def _value(v: Any) -> AttrValue | None:
    """An AnyValue's scalar; arrays, maps and bytes are not timings: None."""
    which = v.WhichOneof("value")
    if which in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(v, which)
    return None


def _attrs(kvs: Iterable[Any]) -> dict[str, AttrValue]:
    out = {}
    for kv in kvs:
        value = _value(kv.value)
        if value is not None:
            out[kv.key] = value
    return out


def decode(body: bytes) -> list[Span]:
    """Every span of one OTLP/HTTP protobuf export; ValueError when it is not one."""
    req = _pb().ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except Exception as err:  # protobuf's DecodeError, whichever implementation runs
        raise ValueError(f"not an OTLP ExportTraceServiceRequest: {err}") from None
    spans = []
    for rs in req.resource_spans:
        service = _attrs(rs.resource.attributes).get("service.name")
        for ss in rs.scope_spans:
            for sp in ss.spans:
                spans.append(Span(
                    sp.trace_id.hex(), sp.span_id.hex(), sp.name, sp.start_time_unix_nano,
                    sp.end_time_unix_nano, sp.parent_span_id.hex(), sp.kind,
                    _attrs(sp.attributes), service if isinstance(service, str) else None))
    return spans


def _any_value(value: AttrValue, common: Any) -> Any:
    if isinstance(value, bool):
        return common.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common.AnyValue(int_value=value)
    if isinstance(value, float):
        return common.AnyValue(double_value=value)
    return common.AnyValue(string_value=str(value))


def _key_values(attrs: dict[str, AttrValue], common: Any) -> list[Any]:
    return [common.KeyValue(key=k, value=_any_value(v, common)) for k, v in attrs.items()]


def encode(spans: list[Span], service: str, scope: str, version: str) -> bytes:
    """One ExportTraceServiceRequest with every span under one resource and scope."""
    from opentelemetry.proto.common.v1 import common_pb2 as common
    from opentelemetry.proto.resource.v1 import resource_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    out = [trace_pb2.Span(
        trace_id=bytes.fromhex(s.trace_id), span_id=bytes.fromhex(s.span_id),
        parent_span_id=bytes.fromhex(s.parent_span_id), name=s.name, kind=s.kind,  # type: ignore[arg-type]
        start_time_unix_nano=s.start_unix_ns, end_time_unix_nano=s.end_unix_ns,
        attributes=_key_values(s.attributes, common)) for s in spans]
    resource = resource_pb2.Resource(attributes=_key_values({"service.name": service}, common))
    scoped = trace_pb2.ScopeSpans(scope=common.InstrumentationScope(name=scope, version=version),
                                  spans=out)
    req = _pb().ExportTraceServiceRequest(
        resource_spans=[trace_pb2.ResourceSpans(resource=resource, scope_spans=[scoped])])
    return bytes(req.SerializeToString())


def empty_response() -> bytes:
    """The body of a successful export's answer (an empty ExportTraceServiceResponse)."""
    return bytes(_pb().ExportTraceServiceResponse().SerializeToString())
