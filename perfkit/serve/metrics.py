"""GET /metrics: Prometheus text exposition (format 0.0.4), or OpenMetrics 1.0 when the
scrape asks for it (Accept: application/openmetrics-text), with vLLM's metric names, so
dashboards and scrapers written for vLLM read perfkit serve unchanged.

Names. vLLM's `vllm:*` metrics keep vLLM's spelling on purpose, colon included (dashboards
match them by name), although Prometheus reserves colons for recording rules and
`promtool check metrics` reports them. perfkit's own metrics follow Prometheus's
conventions: `perfkit_` prefix, base units, counters ending in `_total`.

Written by hand (a few dozen lines) instead of depending on prometheus_client. Every
sample carries a `model_name` label. Token counters count tokens; the prefix-cache
pair counts prompt tokens looked up and found at each admission (a request
re-admitted after preemption is looked up again, as vLLM does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfkit.serve.state import ServerState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass(frozen=True)
class Metric:
    name: str
    kind: Literal["gauge", "counter"]
    help: str
    # (extra labels, value); one unlabelled sample unless given
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def _one(name: str, kind: Literal["gauge", "counter"], help_: str, value: float) -> Metric:
    return Metric(name, kind, help_, [({}, value)])


def collect(state: ServerState) -> list[Metric]:
    engine, c = state.engine, state.counters
    pool, sched = engine.pool, engine.scheduler
    return [
        _one("vllm:num_requests_running", "gauge", "Requests in the running batch.",
             len(sched.running)),
        _one("vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
             len(sched.waiting)),
        _one("vllm:kv_cache_usage_perc", "gauge",
             "KV-cache usage in blocks, 1 - free / num_blocks (1 means 100 percent).",
             1.0 - pool.num_free_blocks / pool.num_blocks),
        _one("vllm:num_preemptions_total", "counter", "Preemptions (recompute).",
             sched.num_preemptions),
        _one("vllm:prefix_cache_queries_total", "counter",
             "Prefix-cache queries, in tokens.", c.prefix_queries),
        _one("vllm:prefix_cache_hits_total", "counter", "Prefix-cache hits, in tokens.",
             c.prefix_hits),
        _one("vllm:prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
             c.prompt_tokens),
        _one("vllm:generation_tokens_total", "counter", "Generated tokens.",
             engine.stats.sampled_tokens),
        Metric("vllm:request_success_total", "counter", "Finished requests by finish reason.",
               [({"finished_reason": k}, v) for k, v in sorted(c.finished.items())]),
        Metric("perfkit_requests_rejected_total", "counter",
               "Requests refused at admission, by reason.",
               [({"reason": k}, v) for k, v in sorted(c.rejected.items())]),
        _one("perfkit_queued_tokens", "gauge",
             "Tokens (prompt + max_tokens) of accepted, unfinished requests (the quota's use).",
             state.queued_tokens),
        _one("perfkit_engine_steps_total", "counter", "Engine steps run.", engine.stats.steps),
        _one("perfkit_sampler_seconds_total", "counter",
             "Time in the token sampler (since start or the last stats reset).",
             engine.stats.sampler_s),
        _one("perfkit_guard_seconds_total", "counter",
             "Time in the guard: logits masks and grammar checks.", engine.stats.guard_s),
    ]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render(metrics: list[Metric], model_name: str, openmetrics: bool = False) -> str:
    """Text format 0.0.4; or OpenMetrics: a counter's family is named without `_total`
    (its samples keep it) and the exposition ends with `# EOF`."""
    lines = []
    for m in metrics:
        family = m.name.removesuffix("_total") if openmetrics and m.kind == "counter" \
            else m.name
        help_ = m.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines += [f"# HELP {family} {help_}", f"# TYPE {family} {m.kind}"]
        for extra, value in m.samples:
            labels = _labels({"model_name": model_name} | extra)
            lines.append(f"{m.name}{labels} {_value(value)}")
    if openmetrics:
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def wants_openmetrics(accept: str) -> bool:
    """A scrape that lists OpenMetrics among what it accepts (Prometheus does, first)."""
    return "application/openmetrics-text" in accept
