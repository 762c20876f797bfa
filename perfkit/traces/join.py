"""After a remote level: wait (bounded) for the server's spans of its requests, join them.

The requests to join are the level's measured requests that completed (a warm-up, refused
or failed request may have no span, or a partial one). Servers export spans in batches
(OpenTelemetry's batch processor: every 5 s by default), so the last requests' spans come
after the level: the join polls the store every POLL_S until every request is joined or
`wait_s` has passed since the level's last request, then says how many it could not join.
Spans of warm-up and failed requests are taken out of the store and dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from perfkit.records import RequestRecord
from perfkit.result.dist import Distribution
from perfkit.result.server_traces import ServerTiming, ServerTraces
from perfkit.summary.latency import distribution, measured_records
from perfkit.traces.store import SpanStore
from perfkit.traces.timings import engine_s, server_timing

WAIT_S = 10.0  # default bound on the wait after a level's last request (two batch periods)
POLL_S = 0.05
PROTOCOL_FIX = "start the server with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf"


@dataclass(frozen=True)
class LevelTraces:
    """What the join gives the level's result (remote/level.py)."""

    section: ServerTraces
    timings: dict[int, ServerTiming]  # request id -> the server's timing, joined only


def to_join(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in measured_records(records) if r.completed]


def _join_now(pending: list[RequestRecord], store: SpanStore,
              timings: dict[int, ServerTiming]) -> list[RequestRecord]:
    """Join what has arrived; the requests still pending."""
    left = []
    for rec in pending:
        hit = store.take(rec.trace_id, rec.response_id)
        if hit is None:
            left.append(rec)
        else:
            timings[rec.request_id] = server_timing(hit[0], hit[1], rec)
    return left


def join_level(records: Sequence[RequestRecord], store: SpanStore, receiver: str,
               wait_s: float = WAIT_S, percentiles: Sequence[float] = (), spans_before: int = 0,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> LevelTraces:
    """`spans_before`: the store's request-span count when the level started."""
    todo = to_join(records)
    timings: dict[int, ServerTiming] = {}
    start = clock()
    pending = _join_now(todo, store, timings)
    while pending and clock() - start < wait_s:
        sleep(POLL_S)
        pending = _join_now(pending, store, timings)
    waited = clock() - start
    for rec in records:  # drop the spans no one will ask for again
        if rec.request_id not in timings:
            store.take(rec.trace_id, rec.response_id)
    section = _section(todo, timings, store, receiver, waited, percentiles)
    return LevelTraces(replace(section, spans=store.request_spans - spans_before), timings)


def why_unjoined(store: SpanStore, receiver: str) -> str:
    """The likeliest reason spans did not arrive or did not match, with its fix."""
    if store.grpc_attempts:
        return (f"the server's exporter speaks OTLP gRPC to {receiver}; perfkit receives "
                f"OTLP/HTTP protobuf: {PROTOCOL_FIX}")
    if store.bad_payloads:
        return f"{store.bad_payloads} exports refused ({store.last_error})"
    if not store.request_spans:
        return (f"no request span arrived at {receiver} (vLLM: --otlp-traces-endpoint "
                f"http://{receiver}/v1/traces and {PROTOCOL_FIX})")
    return ("spans arrived, but too late or for other requests (none carries these "
            "requests' trace ids or response ids)")


def _dist(values: list[float | None], percentiles: Sequence[float]) -> Distribution | None:
    present = [v for v in values if v is not None]
    return distribution(present, percentiles) if present else None


def _section(todo: list[RequestRecord], timings: dict[int, ServerTiming], store: SpanStore,
             receiver: str, waited: float, percentiles: Sequence[float]) -> ServerTraces:
    n, got = len(todo), list(timings.values())
    if not got:
        why = "no measured request completed" if not n else why_unjoined(store, receiver)
        return replace(ServerTraces.unavailable(f"no request joined: {why}", receiver),
                       requests=n, wait_s=waited)
    e2e = {r.request_id: r.e2e_s for r in todo}
    over = sum(1 for rid, t in timings.items()
               if t.e2e_s is not None and (e2e.get(rid) or 0.0) < t.e2e_s)
    missing = n - len(got)
    reason = "" if not missing else (
        f"{missing} of {n} requests not joined after waiting {waited:.1f} s: "
        + why_unjoined(store, receiver))

    def api(t: ServerTiming) -> float | None:
        inside = engine_s(t)
        return None if inside is None or t.e2e_s is None else t.e2e_s - inside

    def d(get: Callable[[ServerTiming], float | None]) -> Distribution | None:
        return _dist([get(t) for t in got], percentiles)

    return ServerTraces(
        available=True, reason=reason, receiver=receiver, requests=n, joined=len(got),
        by_trace_id=sum(t.joined_by == "trace id" for t in got),
        by_request_id=sum(t.joined_by == "request id" for t in got),
        wait_s=waited, spans=0, over_client_e2e=over,
        queue=d(lambda t: t.queue_s), prefill=d(lambda t: t.prefill_s),
        decode=d(lambda t: t.decode_s), ttft=d(lambda t: t.ttft_s), e2e=d(lambda t: t.e2e_s),
        api_server=d(api), outside_ttft=d(lambda t: t.outside_ttft_s),
        outside_e2e=d(lambda t: t.outside_e2e_s))
