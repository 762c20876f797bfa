"""Where a remote level's slowest requests lost time, as the client saw it.

A client cannot see the server's queue, prefill or batches; it sees when each chunk
arrived. So a request's time splits into its first-token time (queue + prefill + any
interference before the first chunk, inseparable from outside) and its decode, in which a
*stall* is a gap between consecutive chunks longer than STALL_FACTOR times the request's
own median gap (and at least MIN_STALL_S: a burst-delivered stream has ~0 gaps). A stall's
position is the index of the chunk that ended it: the token index when the server streams
one token per chunk (stream.itl_unit "token"), else a chunk index.

For the requests at or above the level's p99 TTFT and p99 TPOT, and for its median
requests (p40..p60) of each, the means per request; the tail requests also one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfkit.result.server_traces import ServerSplit

STALL_FACTOR = 4.0  # a gap > 4x the request's median inter-chunk gap is a stall
MIN_STALL_S = 0.002  # and at least 2 ms (bursts have ~10 µs gaps)
MIN_GAPS = 3  # fewer chunk gaps and a request has no median gap to compare with
MAX_STALLS_KEPT = 8  # per tail request: the longest stalls, by position
MAX_REQUESTS_KEPT = 10  # tail requests listed one by one: the slowest


@dataclass(frozen=True)
class Stall:
    index: int  # the chunk that ended the gap (1: the gap after the first chunk)
    gap_s: float


@dataclass(frozen=True)
class ClientRequest:
    """One tail request as its chunks arrived (times in seconds)."""

    request_id: int
    ttft_s: float  # arrival -> first chunk: queue, prefill, interference together
    tpot_s: float | None
    decode_s: float  # first chunk -> last chunk
    median_gap_s: float | None  # None: fewer than MIN_GAPS gaps
    num_stalls: int
    stall_s: float  # the stalls' summed gaps
    stalls: list[Stall] = field(default_factory=list)  # longest MAX_STALLS_KEPT, by index


@dataclass(frozen=True)
class ClientTailGroup:
    metric: str  # "ttft" or "tpot"
    which: str  # "tail" (>= p99) or "median" (p40..p60)
    threshold_s: float  # the metric's p99 (tail) or p50 (median)
    num_requests: int
    ttft_s: float  # means per request
    decode_s: float
    median_gap_s: float | None  # mean of the requests' median gaps; None: none had one
    num_stalls: float
    stall_s: float
    requests: list[ClientRequest] = field(default_factory=list)  # tail only: slowest first
    server: ServerSplit | None = None  # --server-traces: the window split by server spans


@dataclass(frozen=True)
class ClientTailSection:
    stall_factor: float  # STALL_FACTOR when measured
    min_stall_s: float
    itl_unit: str  # "token" or "chunk": what a stall's index counts
    groups: list[ClientTailGroup] = field(default_factory=list)

    def group(self, metric: str, which: str) -> ClientTailGroup | None:
        return next((g for g in self.groups if g.metric == metric and g.which == which), None)
