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
class WorkerCost:
    """One load-generating process over a level's measured phase: what it cost and how
    far behind its own schedule it ran. Times in seconds; counts apart."""

    index: int  # the worker (0..N-1)
    host: str  # the machine it ran on
    pid: int
    loop: str  # "uvloop" or "asyncio"
    clients: int | None  # closed loop: its share of the level's concurrency; None open loop
    requests: int  # measured requests it sent
    chunks: int  # output chunks it read (of measured requests)
    cpu_s: float  # its CPU (a worker process: user + system; in-process: the loop thread)
    wall_s: float  # measured phase: its origin -> its last request's end
    cpu_share: float  # cpu_s / wall_s: share of the one core its event loop can use
    cpu_per_chunk_s: float | None
    loop_lag: dict[str, Any]  # distribution of timer wake-up delays
    send_late: dict[str, Any]  # distribution of sent_s - arrival_s: its own queue
    achieved_concurrency: float | None  # closed loop: mean requests in flight (see docs)
    coalesced_chunks: int  # chunks read at once with the previous one: gap not timed
    clock_offset_s: float | None  # its clock minus the coordinator's; None: the same clock
    clock_error_s: float | None  # bound of that estimate (half the best round trip)


@dataclass(frozen=True)
class LostWorker:
    """A worker that did not finish its share of a level: what is known of it."""

    index: int
    host: str
    pid: int
    reason: str  # its exit status, its error, or how long it fell silent
    records: int  # requests it had reported (kept in the level) before it was lost


@dataclass(frozen=True)
class ClientOverhead:
    """The load generator's own cost and error over the measured phase, all its workers
    together (`per_worker` keeps each). The latencies count from each request's scheduled
    send; what the client itself added is here: its queue (`send_late`), its loop's lag,
    and the load it actually delivered against the one configured."""

    cpu_s: float  # CPU of every worker together
    wall_s: float
    cpu_share: float  # the busiest worker's cpu_s / wall_s: share of its one core
    requests: int  # requests sent in the phase
    cpu_per_request_s: float | None
    connections: int | None  # connection pool size (None: unlimited, open loop)
    lag_interval_s: float
    loop_lag: dict[str, Any]  # distribution of wake-up delays (seconds), every worker's
    workers: int = 1  # processes that generated the load
    workers_chosen: str = ""  # how their number was chosen ("auto: ...", "--workers 4")
    cores: int | None = None  # cores the workers could use (this host's, or a Ray cluster's)
    chunks: int | None = None  # output chunks read
    chunks_per_s: float | None = None  # chunks / wall_s
    cpu_per_chunk_s: float | None = None  # cpu_s / chunks
    send_late: dict[str, Any] = field(default_factory=dict)  # sent_s - arrival_s, all
    achieved_concurrency: float | None = None  # mean in flight, summed over workers
    achieved_rate: float | None = None  # open loop: requests sent per second
    scheduled_rate: float | None = None  # open loop: the schedule's own rate, same window
    load_error: float | None = None  # achieved / configured - 1 (concurrency or rate)
    complete: bool = True  # every worker reported its end (False: the level lost one)
    target_down: str | None = None  # the level stopped sending: the target refused everything
    per_worker: list[WorkerCost] = field(default_factory=list)  # the workers that finished
    lost: list[LostWorker] = field(default_factory=list)  # the ones that did not


@dataclass(frozen=True)
class StreamStats:
    """How a level's responses arrived: one token per chunk, several, or all at once.

    A client times chunks, not tokens: ITL samples are gaps between chunks (`itl_unit`
    says "token" when every chunk carried one token, else "chunk"). A request arrives
    "in a burst" when it has two or more output tokens and all of its chunks came within
    `burst_span_s` of each other: its TPOT and ITL are then near 0 and measure the
    network, not decoding (`degenerate`: more than half of the level's requests did).
    Chunks that one read returned together share its time: their gaps were not timed and
    are left out of ITL; when more than 5% of gaps were, no ITL is reported at all
    (`itl_measured`), whoever coalesced them."""

    chunks: int  # chunks with output, over measured requests that completed
    output_tokens: int  # their output tokens (usage, else one per chunk)
    tokens_per_chunk: float | None  # output_tokens / chunks
    itl_unit: str  # "token" or "chunk"
    burst_requests: int  # completed requests delivered in a burst
    burst_share: float | None  # of completed measured requests
    burst_span_s: float  # the threshold used
    degenerate: bool  # burst_share > 0.5: TPOT, ITL and a knee on them mean nothing
    coalesced_chunks: int = 0  # chunks read at once with the one before: gap not timed
    coalesced_share: float | None = None  # of the chunk gaps (chunks after each first)
    itl_measured: bool = True  # False: too many gaps were not timed; ITL is not reported
    itl_reason: str = ""  # why not, and whose doing it was (the client's, or the server's)


@dataclass(frozen=True)
class ServerProfile:
    """--server-profile at this level: the server's own profiler around the measured phase."""

    written: bool  # the server started and stopped its profiler: its trace is written
    message: str  # one line: where the trace went, or why there is none (and the fix)
    trace_dir: str | None  # --server-profile-dir, when given
    trace_files: list[str] = field(default_factory=list)  # files new there after the level
