"""A remote level's records -> ClientTailSection (result/client_tail.py: the rules).

Each request's chunk times are on the level's clock; its gaps are consecutive differences.
The tail and median groups are cut as the in-process breakdown cuts them (result/tail.py):
>= p99 of the metric, and p40..p60. With the server's spans joined (--server-traces), each
group also carries its window split by them (summary/server_split.py).
"""

from __future__ import annotations

from itertools import pairwise
from statistics import median

from perfkit.records import RequestRecord
from perfkit.result.client_tail import (
    MAX_REQUESTS_KEPT,
    MAX_STALLS_KEPT,
    MIN_GAPS,
    MIN_STALL_S,
    STALL_FACTOR,
    ClientRequest,
    ClientTailGroup,
    ClientTailSection,
    Stall,
)
from perfkit.result.server_traces import ServerTiming
from perfkit.result.tail import TAIL_Q
from perfkit.stats import quantile
from perfkit.summary.server_split import server_split
from perfkit.summary.tail_breakdown import MEDIAN_HI, MEDIAN_LO


def stalls_of(times: list[float], coalesced: bool = False) -> tuple[float | None, list[Stall]]:
    """(the median gap, every stall in order) of one request's chunk times. `coalesced`:
    some chunks came in one read with the one before; their zero gaps were not timed and
    stay out of the median (summary/latency.py: timed_gaps)."""
    gaps = [b - a for a, b in pairwise(times)]
    timed = [g for g in gaps if g > 0.0] if coalesced else gaps
    if len(timed) < MIN_GAPS:
        return None, []
    mid = median(timed)
    limit = max(STALL_FACTOR * mid, MIN_STALL_S)
    return mid, [Stall(i + 1, g) for i, g in enumerate(gaps) if g > limit]


def client_request(rec: RequestRecord) -> ClientRequest:
    times, ttft = rec.token_times_s, rec.ttft_s or 0.0
    mid, stalls = stalls_of(times, rec.coalesced_chunks > 0)
    kept = sorted(sorted(stalls, key=lambda s: -s.gap_s)[:MAX_STALLS_KEPT], key=lambda s: s.index)
    return ClientRequest(rec.request_id, ttft, rec.tpot_s, times[-1] - times[0] if times else 0.0,
                         mid, len(stalls), sum(s.gap_s for s in stalls), kept)


def _group(views: list[ClientRequest], metric: str, which: str, threshold: float,
           recs: dict[int, RequestRecord], timings: dict[int, ServerTiming]) -> ClientTailGroup:
    n = max(len(views), 1)
    gaps = [v.median_gap_s for v in views if v.median_gap_s is not None]
    return ClientTailGroup(
        metric, which, threshold, len(views),
        ttft_s=sum(v.ttft_s for v in views) / n, decode_s=sum(v.decode_s for v in views) / n,
        median_gap_s=sum(gaps) / len(gaps) if gaps else None,
        num_stalls=sum(v.num_stalls for v in views) / n,
        stall_s=sum(v.stall_s for v in views) / n,
        requests=views[:MAX_REQUESTS_KEPT] if which == "tail" else [],
        server=server_split([recs[v.request_id] for v in views], metric, timings)
        if timings else None)


def _metric(view: ClientRequest, metric: str) -> float | None:
    return view.ttft_s if metric == "ttft" else view.tpot_s


def client_tail_section(records: list[RequestRecord], itl_unit: str,
                        timings: dict[int, ServerTiming] | None = None
                        ) -> ClientTailSection | None:
    """None when no measured request completed with a first chunk. `timings`: the joined
    server spans by request id."""
    done = [r for r in records if not r.warmup and r.completed and r.token_times_s]
    if not done:
        return None
    recs, timings = {r.request_id: r for r in done}, timings or {}
    views = [client_request(r) for r in done]
    groups = []
    for metric in ("ttft", "tpot"):
        pairs = sorted(((v, x) for x in views if (v := _metric(x, metric)) is not None),
                       key=lambda p: -p[0])  # slowest first
        if not pairs:
            continue
        values = [v for v, _ in pairs]
        p99, lo, hi = (quantile(values, q) for q in (TAIL_Q, MEDIAN_LO, MEDIAN_HI))
        groups.append(_group([x for v, x in pairs if v >= p99], metric, "tail", p99, recs,
                             timings))
        groups.append(_group([x for v, x in pairs if lo <= v <= hi], metric, "median",
                             quantile(values, 0.5), recs, timings))
    return ClientTailSection(STALL_FACTOR, MIN_STALL_S, itl_unit, groups)
