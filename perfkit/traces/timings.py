"""A server span's attributes -> one request's ServerTiming (result/server_traces.py).

The attribute names are vLLM's (vllm/tracing/utils.py SpanAttributes, 0.32; its
OutputProcessor.do_tracing sets them on the `llm_request` span when a request finishes):

    queue    gen_ai.latency.time_in_queue          scheduled_ts - queued_ts (engine core)
    prefill  gen_ai.latency.time_in_model_prefill  first_token_ts - scheduled_ts
    decode   gen_ai.latency.time_in_model_decode   last_token_ts - first_token_ts
    ttft     gen_ai.latency.time_to_first_token    first token seen by the API server - arrival
    e2e      gen_ai.latency.e2e                    finish seen by the API server - arrival

all in seconds (doubles). A span without an e2e attribute gives its own duration (a span
from arrival to finish, as vLLM's is); every other value absent stays None.
"""

from __future__ import annotations

import math

from perfkit.records import RequestRecord
from perfkit.result.server_traces import ServerTiming
from perfkit.traces.otlp import Span

QUEUE = "gen_ai.latency.time_in_queue"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
TTFT = "gen_ai.latency.time_to_first_token"
E2E = "gen_ai.latency.e2e"


def seconds(span: Span, key: str) -> float | None:
    """A finite, non-negative number of seconds, or None."""
    value = span.attributes.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _e2e(span: Span) -> float | None:
    e2e = seconds(span, E2E)
    if e2e is None and span.end_unix_ns > span.start_unix_ns > 0:
        return (span.end_unix_ns - span.start_unix_ns) / 1e9
    return e2e


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def server_timing(span: Span, joined_by: str, rec: RequestRecord) -> ServerTiming:
    ttft, e2e = seconds(span, TTFT), _e2e(span)
    return ServerTiming(
        joined_by=joined_by, queue_s=seconds(span, QUEUE), prefill_s=seconds(span, PREFILL),
        decode_s=seconds(span, DECODE), ttft_s=ttft, e2e_s=e2e,
        outside_ttft_s=_minus(rec.ttft_s, ttft), outside_e2e_s=_minus(rec.e2e_s, e2e))


def engine_s(t: ServerTiming) -> float | None:
    """queue + prefill + decode: the request's time inside the engine."""
    parts = (t.queue_s, t.prefill_s, t.decode_s)
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
