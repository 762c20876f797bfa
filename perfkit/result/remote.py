"""Sections only a remote level has: the server's scraped metrics, failures, client cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerMetrics:
    """One level's server-side figures; None where the server did not export a metric."""

    available: bool
    reason: str  # why not, when unavailable
    url: str | None
    num_scrapes: int = 0
    num_failed: int = 0
    kv_usage_peak: float | None = None  # share of KV blocks in use, [0, 1]
    kv_usage_mean: float | None = None  # over the scrapes of the measured phase
    peak_running: int | None = None
    peak_waiting: int | None = None
    preemptions: int | None = None  # counter deltas over the measured phase
    prefix_queries: int | None = None
    prefix_hits: int | None = None
    prefix_hit_rate: float | None = None  # hits / queries (tokens)
    timeline: dict[str, list[Any]] = field(default_factory=dict)  # t_s, kv_usage, running, ...

    @classmethod
    def unavailable(cls, reason: str) -> ServerMetrics:
        return cls(False, reason, None)


@dataclass(frozen=True)
class ErrorCounts:
    total: int  # failed or refused measured requests
    by_kind: dict[str, int]
    warmup: int  # failures among warm-up requests
    retry_after_s_max: float | None


@dataclass(frozen=True)
class ClientOverhead:
    """The load generator's own cost over the measured phase."""

    cpu_s: float  # event-loop thread CPU seconds
    wall_s: float
    cpu_share: float  # cpu_s / wall_s: share of the one core the client can use
    requests: int  # requests sent in the phase
    cpu_per_request_s: float | None
    connections: int | None  # connection pool size (None: unlimited, open loop)
    lag_interval_s: float
    loop_lag: dict[str, Any]  # distribution of wake-up delays (seconds)


@dataclass(frozen=True)
class StreamStats:
    """How a level's responses arrived: one token per chunk, several, or all at once.

    A client times chunks, not tokens: ITL samples are gaps between chunks (`itl_unit`
    says "token" when every chunk carried one token, else "chunk"). A request arrives
    "in a burst" when it has two or more output tokens and all of its chunks came within
    `burst_span_s` of each other: its TPOT and ITL are then near 0 and measure the
    network, not decoding (`degenerate`: more than half of the level's requests did)."""

    chunks: int  # chunks with output, over measured requests that completed
    output_tokens: int  # their output tokens (usage, else one per chunk)
    tokens_per_chunk: float | None  # output_tokens / chunks
    itl_unit: str  # "token" or "chunk"
    burst_requests: int  # completed requests delivered in a burst
    burst_share: float | None  # of completed measured requests
    burst_span_s: float  # the threshold used
    degenerate: bool  # burst_share > 0.5: TPOT, ITL and a knee on them mean nothing


@dataclass(frozen=True)
class ServerProfile:
    """--server-profile at this level: the server's own profiler around the measured phase."""

    written: bool  # the server started and stopped its profiler: its trace is written
    message: str  # one line: where the trace went, or why there is none (and the fix)
    trace_dir: str | None  # --server-profile-dir, when given
    trace_files: list[str] = field(default_factory=list)  # files new there after the level
