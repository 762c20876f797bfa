"""W3C trace context (https://www.w3.org/TR/trace-context/) for one request: one trace per
request, so a server span that carries the trace id belongs to exactly one request.

    traceparent: 00-<trace id: 32 hex>-<parent span id: 16 hex>-01

The parent span id is the id of perfkit's own client span of the request: the trace id's
last 16 hex digits, so a record needs to keep the trace id only (export.py gives the client
span that id, and the server's span becomes its child). The flags say "sampled" (01): a
server that samples by its parent (OpenTelemetry's default, vLLM's) then records the span.
"""

from __future__ import annotations

import secrets

VERSION = "00"
SAMPLED = "01"


def new_trace_id() -> str:
    """32 random hex digits, never all zeros (an invalid id); the span id part neither."""
    while True:
        trace_id = secrets.token_hex(16)
        if int(trace_id, 16) and int(client_span_id(trace_id), 16):
            return trace_id


def client_span_id(trace_id: str) -> str:
    return trace_id[16:]


def traceparent(trace_id: str) -> str:
    return f"{VERSION}-{trace_id}-{client_span_id(trace_id)}-{SAMPLED}"
