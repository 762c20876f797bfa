"""One level of a sweep: a load point and one repeat, its sections typed.

Counts (deterministic for profile + seed) and timings (noisy) live in different
sections. A section or field that was not measured is None: remote levels have no
engine steps, no block counts and, without scraping, no preemptions.

JSON layout of a level (perfkit.sweep/2):
  concurrency | rate, repeat
  counts      ints: tokens, requests, preemptions, engine steps, block-pool counters
  latency     ttft / tpot / itl / e2e / queue distributions (seconds)
  throughput  requests/s, tokens/s;  goodput;  observed_concurrency;  prefix_hit_rate
  kv          KV usage: blocks and token slots (in-process) or the scraped share (remote)
  guard       tool-call guard counts and its timing, apart (in-process only)
  cpu, gc, gpu, cuda   sampler results
  system      the whole machine's CPU apart from this process (contention)
  server, errors, client   remote only: scraped metrics, failures, the client's own cost
  server_traces  remote only: the join with the server's own spans (--server-traces)
  otlp_export    --otlp-export: perfkit's own spans sent to a collector
  stacks      with --stacks: where the folded stacks went
  contention  with --contention: GIL and lock waits per thread, holders, CPU counters
  requests    raw per-request samples
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfkit.measure.cuda_mem import CudaMemStats
from perfkit.measure.gc import GcStats
from perfkit.measure.nvml import NvmlStats
from perfkit.measure.proc import ProcStats
from perfkit.measure.system import SystemStats
from perfkit.result.client_tail import ClientTailSection
from perfkit.result.contention import ContentionSection
from perfkit.result.dist import Distribution
from perfkit.result.point import LoadPoint
from perfkit.result.remote import (
    ClientOverhead,
    ErrorCounts,
    ServerMetrics,
    ServerProfile,
    StreamStats,
)
from perfkit.result.server_traces import OtlpExport, ServerTiming, ServerTraces
from perfkit.result.stacks import StacksInfo
from perfkit.result.tail import TailSection

__all__ = ["Distribution", "ErrorCounts", "LoadPoint"]


@dataclass(frozen=True)
class Latency:
    ttft: Distribution  # served requests with a first token
    tpot: Distribution  # completed requests with >= 2 output tokens
    itl: Distribution  # every inter-token gap of every served request, pooled
    e2e: Distribution  # completed requests
    queue: Distribution  # served requests the scheduler admitted (in-process only)


@dataclass(frozen=True)
class Throughput:
    window_s: float | None  # seconds the rates are over; None when nothing finished
    requests_per_s: float | None  # completed requests
    output_tokens_per_s: float | None  # output tokens of served requests
    total_tokens_per_s: float | None  # prompt + output tokens of served requests


@dataclass(frozen=True)
class Goodput:
    requests: int  # measured requests, rejected and failed included (the share's base)
    good_requests: int  # completed and meeting every set SLO target
    share: float | None  # good_requests / requests; None without requests
    good_per_s: float | None  # good_requests / window_s; None without a window
    window_s: float | None


@dataclass(frozen=True, kw_only=True)
class Counts:
    """Integers only. None: not measured where this level ran (a remote target)."""

    requests: int  # measured requests, rejected included
    completed: int  # served, finished, not cancelled or errored
    rejected: dict[str, int]  # measured rejections by reason
    finish_reasons: dict[str, int]  # served requests by finish reason ("unfinished" if none)
    preemptions: int | None  # in-process: summed over requests; remote: the scraped counter
    prompt_tokens: int  # served requests only
    output_tokens: int
    cached_tokens: int
    warmup_excluded: int  # flagged warm-up requests plus those that overlapped the warm-up
    steps: int | None = None  # engine steps (in-process only)
    batched_tokens: int | None = None  # tokens computed over those steps
    pool_allocations: int | None = None  # block pool counters (in-process only)
    pool_frees: int | None = None
    pool_hits: int | None = None  # prefix-cache block lookups that hit
    pool_misses: int | None = None
    pool_evictions: int | None = None
    pool_copy_on_writes: int | None = None  # shared blocks copied before a write
    # outputs of the served requests: n samples or beams each (1 each without them)
    outputs: int | None = None

    @property
    def num_rejected(self) -> int:
        return sum(self.rejected.values())


@dataclass(frozen=True)
class KvTimeline:
    """At most MAX_TIMELINE_POINTS points, evenly strided over the level's steps."""

    t_s: list[float] = field(default_factory=list)  # since the first step
    blocks_used: list[int] = field(default_factory=list)
    slots_used: list[int] = field(default_factory=list)  # token slots holding a token
    running: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class KvSection:
    """KV usage. In-process: blocks and token slots of the engine's pool, every step.
    Remote: the server's share of blocks in use (scraped), no block or slot counts."""

    available: bool
    reason: str = ""  # why not, when unavailable
    source: str  # "engine block pool" or the scraped metric's name
    blocks_total: int | None = None
    slots_total: int | None = None
    block_size: int | None = None
    peak_blocks_used: int | None = None
    peak_slots_used: int | None = None
    mean_blocks_used: float | None = None  # per step
    mean_slots_used: float | None = None
    usage_peak: float | None = None  # share of blocks in use, [0, 1]
    usage_mean: float | None = None
    peak_waiting: int | None = None  # requests waiting for admission
    peak_running: int | None = None  # sequences running in one step: the batch at its widest
    timeline: KvTimeline = field(default_factory=KvTimeline)
    # sharing (in-process): blocks in more than one block table (a request's outputs,
    # prefix hits), and table entries beyond the used blocks (what sharing saves); per step
    mean_blocks_shared: float | None = None
    peak_blocks_shared: int | None = None
    mean_blocks_saved: float | None = None
    peak_blocks_saved: int | None = None

    @property
    def memory_saving(self) -> float | None:
        """The PagedAttention paper's measure (§6.3): blocks saved by sharing / blocks
        needed without sharing, over the level's steps."""
        if self.mean_blocks_saved is None or self.mean_blocks_used is None:
            return None
        needed = self.mean_blocks_used + self.mean_blocks_saved
        return self.mean_blocks_saved / needed if needed else 0.0

    @property
    def waste_slots(self) -> float | None:
        """Mean token slots held in allocated blocks but holding no token, per step."""
        if self.mean_blocks_used is None or self.mean_slots_used is None \
                or self.block_size is None:
            return None
        return self.mean_blocks_used * self.block_size - self.mean_slots_used


@dataclass(frozen=True)
class GuardCounts:
    ended: dict[str, int]  # requests ended by reason (stop = tool call accepted, loop, length)
    tool_calls: int
    invalid_tool_calls: int  # must be 0 with the guard on


@dataclass(frozen=True)
class GuardTiming:
    guard_s: float
    us_per_step: float


@dataclass(frozen=True)
class GuardSection:
    counts: GuardCounts
    timing: GuardTiming


@dataclass(frozen=True, kw_only=True)
class RequestSample:
    """One request as measured; times in seconds from the level's clock."""

    id: int
    warmup: bool
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    preemptions: int | None  # None: not visible (a remote target)
    rejected: str | None
    finish_reason: str | None
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    queue_s: float | None  # None remotely: a client cannot see the server's queue
    itl_s: list[float]  # gaps between one output's tokens, every output's, pooled
    error: str | None = None  # remote: the failure kind, None when it succeeded
    trace_id: str | None = None  # remote: the W3C trace id sent in its traceparent header
    response_id: str | None = None  # remote: the server's response id (its chunks' "id")
    arrival_unix_s: float | None = None  # remote: arrival_s on the wall clock (for logs)
    server: ServerTiming | None = None  # --server-traces: the server's span, joined
    outputs: int = 1  # outputs asked for (n samples or beams); output_tokens counts all


@dataclass(frozen=True, kw_only=True)
class LevelResult:
    concurrency: int | None
    rate: float | None
    repeat: int
    counts: Counts
    latency: Latency
    throughput: Throughput
    goodput: Goodput
    observed_concurrency: float | None  # sum of E2E / window
    # Prompt tokens found in the prefix cache at each request's first admission, over
    # prompt tokens: one definition in-process and remotely (see remote/level.py).
    prefix_hit_rate: float | None
    kv: KvSection
    guard: GuardSection | None = None  # in-process only
    cpu: ProcStats
    gc: GcStats
    gpu: NvmlStats
    cuda: CudaMemStats
    # The machine around the level: other processes' CPU, steal, load. None: not measured
    # (results written before perfkit measured it).
    system: SystemStats | None = None
    server: ServerMetrics | None = None  # remote only
    errors: ErrorCounts | None = None  # remote only
    client: ClientOverhead | None = None  # remote only
    stream: StreamStats | None = None  # remote only: how the server's chunks arrived
    stacks: StacksInfo | None = None  # with --stacks
    tail: TailSection | None = None  # in-process: where the p99 requests' time went
    client_tail: ClientTailSection | None = None  # remote: p99 requests' first token, stalls
    # with --contention: GIL and lock waits per thread, their holders, counters
    contention: ContentionSection | None = None
    server_profile: ServerProfile | None = None  # remote, --server-profile levels only
    # remote: the join with the server's own request spans (--server-traces), or why not
    server_traces: ServerTraces | None = None
    otlp_export: OtlpExport | None = None  # --otlp-export: perfkit's own spans sent
    requests: list[RequestSample] = field(default_factory=list)

    @property
    def point(self) -> LoadPoint:
        return LoadPoint(self.concurrency, self.rate)

    @property
    def remote(self) -> bool:
        return self.client is not None
