"""A remote level's typed result: the in-process sections, filled from what a client sees.

Differences from an in-process level (perfkit.sweep.level), each a None where a client
cannot measure:
  counts       from the client's records (usage token counts); `preemptions` is the
               server's counter delta when scraped, else None; steps, batched tokens and
               the block-pool counters None (a client cannot count engine steps).
  prefix_hit_rate  one definition in both modes: prompt tokens found in the prefix cache
               when a request was first admitted, over prompt tokens (usage's
               prompt_tokens_details.cached_tokens). A server that does not report them:
               the scraped counters' hits / queries, but only without preemptions (the
               counters also count a preempted request's re-prefill), else None.
               server.prefix_hit_rate keeps the raw counter ratio either way.
  kv           with --scrape-metrics: usage_peak and usage_mean (share of KV blocks, from
               vllm:kv_cache_usage_perc) and peak_waiting; block and slot counts None.
  guard        None; requests[].preemptions None, requests[].error names a failure.
  stream       tokens per chunk, bursts, chunks read together (remote/stream.py); ITL
               samples are timed chunk gaps, and none when too few gaps were timed.
  client_tail  the p99 TTFT / TPOT requests against the median ones: first-token time and
               stalls between chunks (result/client_tail.py); `tail` stays None.
  server       the scraped metrics; errors: failures by kind; client: the load
               generator's own cost.
  server_traces  --server-traces: the join with the server's own request spans
               (result/server_traces.py): per request `requests[].server`, and the tail
               groups split into queue / prefill / decode / outside the engine; without
               it, unavailable with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from perfkit.config.schema import SloConfig
from perfkit.measure.samplers import LevelMeasurements
from perfkit.records import RequestRecord
from perfkit.remote.stream import stream_stats
from perfkit.result.level import Distribution, KvSection, LevelResult, LoadPoint
from perfkit.result.remote import ClientOverhead, ErrorCounts, ServerMetrics, ServerProfile
from perfkit.result.server_traces import ServerTraces
from perfkit.summary.client_tail import client_tail_section
from perfkit.sweep.level import measured_level, request_sample
from perfkit.traces.join import LevelTraces
from perfkit.traces.session import NO_TRACES

REMOTE_GPU = "remote target: the server's GPU is not visible from the client"
SCRAPED_KV = "vllm:kv_cache_usage_perc (scraped)"


@dataclass
class RemoteRun:
    """Everything one remote level measured, before analysis."""

    point: LoadPoint
    repeat: int
    records: list[RequestRecord]
    errors: dict[int, str]  # request id -> failure kind
    retry_after_s: list[float]
    overhead: ClientOverhead
    server: ServerMetrics
    measurements: LevelMeasurements
    cached_reported: bool = False  # the server's usage carried cached_tokens
    server_profile: ServerProfile | None = None  # --server-profile at this level
    traces: LevelTraces | None = None  # --server-traces: the join, after the level


def _kv(server: ServerMetrics) -> KvSection:
    peak = server.kv_usage_peak
    return KvSection(
        available=server.available and peak is not None,
        reason=server.reason or ("" if peak is not None else "the server exports no KV usage"),
        source=SCRAPED_KV, usage_peak=peak, usage_mean=server.kv_usage_mean,
        peak_waiting=server.peak_waiting, peak_running=server.peak_running)


def _errors(run: RemoteRun) -> ErrorCounts:
    warm = {r.request_id for r in run.records if r.warmup}
    measured = [k for rid, k in run.errors.items() if rid not in warm]
    return ErrorCounts(total=len(measured), by_kind=dict(Counter(measured)),
                       warmup=len(run.errors) - len(measured),
                       retry_after_s_max=max(run.retry_after_s, default=None))


def remote_level_result(run: RemoteRun, slo: SloConfig, percentiles: Sequence[float] = ()
                        ) -> LevelResult:
    server = run.server
    level = measured_level(run.point, run.repeat, run.records, slo, run.measurements,
                           _kv(server), percentiles)
    stream = stream_stats(run.records, run.overhead.loop_lag.get("p99"))
    timings = run.traces.timings if run.traces is not None else {}
    hit_rate = level.prefix_hit_rate  # first-admission hits, from usage
    if not run.cached_reported:
        hit_rate = server.prefix_hit_rate if server.preemptions == 0 else None
    latency = level.latency if stream.itl_measured else replace(level.latency,
                                                                 itl=Distribution(count=0))
    return replace(
        level, latency=latency,
        counts=replace(level.counts, preemptions=server.preemptions),
        prefix_hit_rate=hit_rate,
        gpu=replace(level.gpu, reason=REMOTE_GPU),
        server=server, errors=_errors(run), client=run.overhead,
        stream=stream,
        client_tail=client_tail_section(run.records, stream.itl_unit, timings),
        server_profile=run.server_profile,
        server_traces=(run.traces.section if run.traces is not None
                       else ServerTraces.unavailable(NO_TRACES)),
        requests=[replace(request_sample(r, preemptions=False,
                                         error=run.errors.get(r.request_id)),
                          server=timings.get(r.request_id)) for r in run.records])
