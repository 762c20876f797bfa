"""A remote level's result: the in-process layout, filled from what a client can see.

Same keys as perfkit.sweep.level (renderers, findings, gate and report read them),
with these differences:
  counts       from the client's records (usage token counts); `preemptions` is the
               server's counter delta when scraped, else 0; steps and batched_tokens 0
               (a client cannot count engine steps).
  prefix_hit_rate  scraped hits / queries (tokens) when available, else usage's
               cached_tokens / prompt_tokens.
  kv           `available` False without --scrape-metrics; with it, usage_peak and
               usage_mean (share of KV blocks, from vllm:kv_cache_usage_perc) and
               peak_waiting. Block and slot counts stay 0: the server does not export them.
  server       the scraped metrics (perfkit.remote.scrape.ServerMetrics).
  errors       failed and refused requests by kind over the measured phase.
  client       the load generator's own cost (perfkit.remote.overhead).
  requests[]   each sample also names its `error` (None when it succeeded).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from perfkit.config.schema import SloConfig
from perfkit.remote.scrape import ServerMetrics
from perfkit.sweep.level import measured_sections, request_sample

if TYPE_CHECKING:
    from perfkit.remote.driver import RemoteRun

REMOTE_GPU = "remote target: the server's GPU is not visible from the client"


def _kv(server: ServerMetrics) -> dict[str, Any]:
    return {
        "available": server.available and server.kv_usage_peak is not None,
        "reason": server.reason or ("" if server.kv_usage_peak is not None
                                    else "the server exports no KV usage"),
        "source": "vllm:kv_cache_usage_perc (scraped)",
        "usage_peak": server.kv_usage_peak,
        "usage_mean": server.kv_usage_mean,
        "blocks_total": 0, "slots_total": 0, "block_size": 0,
        "peak_blocks_used": 0, "peak_slots_used": 0,
        "mean_blocks_used": 0.0, "mean_slots_used": 0.0,
        "peak_waiting": server.peak_waiting or 0,
        "timeline": {"t_s": [], "blocks_used": [], "slots_used": [], "running": [],
                     "waiting": []},
    }


def _errors(run: RemoteRun) -> dict[str, Any]:
    warm = {r.request_id for r in run.records if r.warmup}
    measured = [k for rid, k in run.errors.items() if rid not in warm]
    return {
        "total": len(measured),
        "by_kind": dict(Counter(measured)),
        "warmup": len(run.errors) - len(measured),
        "retry_after_s_max": max(run.retry_after_s, default=None),
    }


def remote_level_result(run: RemoteRun, slo: SloConfig) -> dict[str, Any]:
    sec = measured_sections(run.records, slo, run.measurements)
    counts, server = sec["counts"], run.server
    if server.preemptions is not None:
        counts["preemptions"] = server.preemptions
    prompt = counts["prompt_tokens"]
    hit_rate = server.prefix_hit_rate
    if hit_rate is None:
        hit_rate = counts["cached_tokens"] / prompt if prompt else 0.0
    return {
        "concurrency": run.level.concurrency,
        "rate": run.level.rate,
        "repeat": run.repeat,
        "counts": {**counts, "steps": 0, "batched_tokens": 0},
        **{k: sec[k] for k in ("latency", "throughput", "goodput", "observed_concurrency")},
        "prefix_hit_rate": hit_rate,
        "kv": _kv(server),
        **{k: sec[k] for k in ("cpu", "gc", "cuda")},
        "gpu": sec["gpu"] | {"reason": REMOTE_GPU},
        "server": server.to_dict(),
        "errors": _errors(run),
        "client": run.overhead.to_dict(),
        "requests": [request_sample(r) | {"error": run.errors.get(r.request_id)}
                     for r in run.records],
    }
