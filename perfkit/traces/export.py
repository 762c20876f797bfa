"""--otlp-export URL: perfkit's own spans of a level, sent to a team's collector (Jaeger,
Tempo, an OpenTelemetry Collector) over OTLP/HTTP protobuf once the level has finished.

Remote, one trace per request, the trace of the traceparent perfkit sent:
    perfkit.request  (CLIENT; its span id is the traceparent's parent id, so the server's
      |               own span of the request is its child in the trace view)
      +- perfkit.first_token   arrival -> first chunk
      +- perfkit.stream        first chunk -> last chunk
In-process, one trace per request, the engine's phases of it:
    perfkit.request  (SERVER)  +- perfkit.queue, perfkit.prefill, perfkit.decode
and one trace per level with the engine's steps (at most MAX_STEPS):
    perfkit.level  +- perfkit.engine.step  (schedule -> tokens appended)

Times go on the wall clock: a remote request's own arrival_unix_s; in-process, the level's
clock shifted by the wall clock's offset when the export runs.
"""

from __future__ import annotations

import secrets
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from perfkit import __version__
from perfkit.result.level import LevelResult, RequestSample
from perfkit.result.server_traces import OtlpExport
from perfkit.traces import otlp
from perfkit.traces.context import client_span_id, new_trace_id
from perfkit.traces.otlp import SPAN_KIND_CLIENT, SPAN_KIND_SERVER, Span

SERVICE = "perfkit"
MAX_STEPS = 20_000  # engine-step spans per level
BATCH = 2_000  # spans per export request
TIMEOUT_S = 10.0


def export_url(url: str) -> str:
    """The collector's traces URL: as given, or with /v1/traces when it has no path."""
    return url.rstrip("/") + "/v1/traces" if urlsplit(url).path in ("", "/") else url


def _ns(t_s: float) -> int:
    return round(t_s * 1e9)


def _span(trace_id: str, name: str, base_ns: int, offset_s: float, dur_s: float,
          parent: str = "", span_id: str | None = None, kind: int = otlp.SPAN_KIND_INTERNAL,
          attrs: dict[str, otlp.AttrValue] | None = None) -> Span:
    """A span `offset_s` after `base_ns`, `dur_s` long (seconds as offsets from one integer
    base: a wall clock in float seconds would round to a quarter of a microsecond)."""
    start = base_ns + _ns(offset_s)
    return Span(trace_id, span_id or secrets.token_hex(8), name, start,
                start + max(_ns(dur_s), 0), parent, kind, attrs or {})


def _attrs(r: RequestSample, level: LevelResult) -> dict[str, otlp.AttrValue]:
    attrs: dict[str, otlp.AttrValue] = {
        "perfkit.level": level.point.label, "perfkit.request.id": r.id,
        "perfkit.warmup": r.warmup, "gen_ai.usage.prompt_tokens": r.prompt_tokens,
        "gen_ai.usage.completion_tokens": r.output_tokens}
    for key, value in (("perfkit.finish_reason", r.finish_reason), ("perfkit.error", r.error),
                       ("gen_ai.response.id", r.response_id)):
        if value is not None:
            attrs[key] = value
    return attrs


def _request(trace_id: str, base_ns: int, r: RequestSample, level: LevelResult, kind: int,
             phases: list[tuple[str, float | None]]) -> list[Span]:
    """The request's root span (id: client_span_id) and its consecutive phases, each from
    where the last ended; a phase without a duration is left out."""
    root = client_span_id(trace_id)
    total = r.e2e_s if r.e2e_s is not None else (r.ttft_s or 0.0)
    out = [_span(trace_id, "perfkit.request", base_ns, 0.0, total, span_id=root, kind=kind,
                 attrs=_attrs(r, level))]
    t = 0.0
    for name, dur in phases:
        if dur is not None:
            out.append(_span(trace_id, name, base_ns, t, dur, root))
            t += dur
    return out


def remote_spans(level: LevelResult) -> list[Span]:
    out = []
    for r in level.requests:
        if r.trace_id is None or r.arrival_unix_s is None:
            continue
        stream = None if r.e2e_s is None or r.ttft_s is None else r.e2e_s - r.ttft_s
        out += _request(r.trace_id, _ns(r.arrival_unix_s), r, level, SPAN_KIND_CLIENT,
                        [("perfkit.first_token", r.ttft_s), ("perfkit.stream", stream)])
    return out


def in_process_spans(level: LevelResult, wall_offset_s: float) -> list[Span]:
    """`wall_offset_s`: wall clock minus the level's perfkit.clock (time.time() - now())."""
    tail = level.tail
    base = _ns(wall_offset_s + (tail.t0_s if tail is not None else 0.0))
    out = []
    for r in level.requests:
        if r.e2e_s is None:
            continue
        prefill = None if r.ttft_s is None or r.queue_s is None else r.ttft_s - r.queue_s
        decode = None if r.ttft_s is None else r.e2e_s - r.ttft_s
        out += _request(new_trace_id(), base + _ns(r.arrival_s), r, level, SPAN_KIND_SERVER,
                        [("perfkit.queue", r.queue_s), ("perfkit.prefill", prefill),
                         ("perfkit.decode", decode)])
    if tail is not None and tail.step_start_s:
        out += _steps(level, tail.step_start_s[:MAX_STEPS], tail.step_end_s[:MAX_STEPS],
                      _ns(wall_offset_s))
    return out


def _steps(level: LevelResult, starts: list[float], ends: list[float], base_ns: int
           ) -> list[Span]:
    trace_id = new_trace_id()
    root = client_span_id(trace_id)
    out = [_span(trace_id, "perfkit.level", base_ns, starts[0], ends[-1] - starts[0],
                 span_id=root, attrs={"perfkit.level": level.point.label,
                                      "perfkit.steps": len(starts)})]
    out += [_span(trace_id, "perfkit.engine.step", base_ns, s, e - s, root,
                  attrs={"perfkit.step": i}) for i, (s, e) in enumerate(zip(starts, ends))]
    return out


def post(url: str, body: bytes) -> str | None:
    """None when the collector took the export; else why not."""
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": otlp.PROTOBUF_TYPE})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            resp.read()
    except urllib.error.HTTPError as err:
        return f"http {err.code}"
    except (urllib.error.URLError, OSError, ValueError) as err:
        return str(getattr(err, "reason", None) or err)
    return None


def export_level(level: LevelResult, url: str, wall_offset_s: float) -> OtlpExport:
    spans = remote_spans(level) if level.remote else in_process_spans(level, wall_offset_s)
    target = export_url(url)
    for i in range(0, len(spans), BATCH):
        error = post(target, otlp.encode(spans[i:i + BATCH], SERVICE, "perfkit", __version__))
        if error is not None:
            return OtlpExport(url=target, spans=i, error=error)
    return OtlpExport(url=target, spans=len(spans), error=None)
