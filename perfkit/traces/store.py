"""The server's request spans as they arrive, indexed for the join (thread-safe: the
receiver's threads add, the sweep's thread takes).

A request span is one that carries the server's request id (`gen_ai.request.id`) or a
`gen_ai.latency.*` attribute: vLLM's `llm_request` span. Other spans (vLLM's start-up
spans, a framework's HTTP spans) are counted and dropped.

Request ids: vLLM's span carries the id its engine got, which for /completions is the
response id plus the prompt's index ("cmpl-abc" -> "cmpl-abc-0"; chat with one prompt:
the response id itself, several: "_0", "_1"). So each span is found by its id and by its
id less one trailing "-N" / "_N".
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from perfkit.traces.otlp import Span

REQUEST_ID = "gen_ai.request.id"
LATENCY_PREFIX = "gen_ai.latency."
_INDEX_SUFFIX = re.compile(r"[-_]\d+$")
MAX_KEPT = 100_000  # request spans waiting for a join (another client's are never taken)


def is_request_span(span: Span) -> bool:
    return REQUEST_ID in span.attributes or any(k.startswith(LATENCY_PREFIX)
                                                for k in span.attributes)


def _weight(span: Span) -> int:
    """Of two request spans in one trace, keep the one that reports more timings."""
    return sum(k.startswith(LATENCY_PREFIX) for k in span.attributes)


class SpanStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_trace: dict[str, Span] = {}
        self._by_id: dict[str, Span] = {}  # the server's request id
        self._by_stem: dict[str, Span] = {}  # the request id less a trailing "-N" / "_N"
        self.request_spans = 0  # received so far
        self.other_spans = 0
        self.bad_payloads = 0  # bodies that were not OTLP protobuf
        self.grpc_attempts = 0  # connections that spoke HTTP/2 (an OTLP gRPC exporter)
        self.last_error = ""  # why the last bad payload was refused
        self.dropped = 0  # spans dropped unjoined, the oldest first, beyond MAX_KEPT

    def add(self, spans: Iterable[Span]) -> None:
        with self._lock:
            for span in spans:
                if not is_request_span(span):
                    self.other_spans += 1
                    continue
                self.request_spans += 1
                old = self._by_trace.get(span.trace_id)
                if old is None or _weight(span) > _weight(old):
                    self._by_trace[span.trace_id] = span
                rid = span.attributes.get(REQUEST_ID)
                if isinstance(rid, str) and rid:
                    self._by_id[rid] = span
                    self._by_stem[_INDEX_SUFFIX.sub("", rid)] = span
            if len(self._by_trace) > MAX_KEPT:
                for old in list(self._by_trace.values())[:MAX_KEPT // 2]:
                    self._forget(old)
                    self.dropped += 1

    def refused(self, reason: str, grpc: bool = False) -> None:
        with self._lock:
            if grpc:
                self.grpc_attempts += 1
            else:
                self.bad_payloads += 1
            self.last_error = reason

    def take(self, trace_id: str | None, response_id: str | None) -> tuple[Span, str] | None:
        """The request's span and how it was found ("trace id" / "request id"), removed from
        the store; None when it has not arrived (yet)."""
        with self._lock:
            span = self._by_trace.get(trace_id) if trace_id else None
            how = "trace id"
            if span is None and response_id:
                span = self._by_id.get(response_id) or self._by_stem.get(response_id)
                how = "request id"
            if span is None:
                return None
            self._forget(span)
            return span, how

    def _forget(self, span: Span) -> None:
        if self._by_trace.get(span.trace_id) is span:
            del self._by_trace[span.trace_id]
        rid = span.attributes.get(REQUEST_ID)
        if isinstance(rid, str):
            for index, key in ((self._by_id, rid), (self._by_stem, _INDEX_SUFFIX.sub("", rid))):
                if index.get(key) is span:
                    del index[key]
