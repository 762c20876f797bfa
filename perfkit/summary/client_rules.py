"""Findings about the load generator itself (remote levels): was the client the bottleneck,
did it deliver the load it was asked for, did every worker finish. Rules have the signature
`(levels, profile) -> list[Finding]`; a None never trips one.

A worker is behind when its event loop used more than half its core, woke up more than
10 ms late (p99), or sent requests more than 10 ms after they were due (p99): chunks then
wait to be read and stamped, and its latencies hold its own delay. The fix names the
`--workers` value that keeps every worker under half a core at the level's client CPU.
"""

from __future__ import annotations

import math

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult
from perfkit.result.remote import ClientOverhead, WorkerCost
from perfkit.result.sweep import Finding

CLIENT_CPU_SHARE_MAX = 0.5  # a worker's CPU / wall: its event loop has one core
CLIENT_LAG_P99_MAX_S = 0.010  # p99 event-loop wake-up delay (chunks stamped late)
SEND_LATE_P99_MAX_S = 0.010  # p99 of sent_s - arrival_s (requests sent late)
LOAD_ERROR_MAX = 0.05  # delivered load off the configured one by more than this


def _behind(w: WorkerCost) -> list[str]:
    """What shows the worker fell behind, in words (empty: it kept up)."""
    lag = w.loop_lag.get("p99") or 0.0
    late = w.send_late.get("p99") or 0.0
    out = []
    if w.cpu_share > CLIENT_CPU_SHARE_MAX:
        out.append(f"used {w.cpu_share:.0%} of a core")
    if lag > CLIENT_LAG_P99_MAX_S:
        out.append(f"its loop woke up {lag * 1e3:.1f} ms late (p99)")
    if late > SEND_LATE_P99_MAX_S:
        out.append(f"it sent requests {late * 1e3:.1f} ms after they were due (p99)")
    return out


def _workers(client: ClientOverhead) -> list[WorkerCost]:
    """Each worker's cost; a result written before workers existed has the one loop's only
    in the level figures, read as worker 0 (host and pid unknown: "")."""
    if client.per_worker:
        return client.per_worker
    return [WorkerCost(0, "", 0, "", client.connections, client.requests, client.chunks or 0,
                       client.cpu_s, client.wall_s, client.cpu_share, client.cpu_per_chunk_s,
                       client.loop_lag, client.send_late, client.achieved_concurrency, 0,
                       None, None)]


def _who(w: WorkerCost, client: ClientOverhead) -> str:
    where = f" (pid {w.pid} on {w.host})" if w.host else ""
    return f"worker {w.index} of {max(client.workers, 1)}{where}"


def workers_needed(client: ClientOverhead) -> int:
    """Workers that would each stay under CLIENT_CPU_SHARE_MAX at this level's client CPU
    (one more than now, at least: a loop that lags needs a share of the load taken off)."""
    cores_used = sum(w.cpu_share for w in _workers(client))
    return max(client.workers + 1, math.ceil(cores_used / CLIENT_CPU_SHARE_MAX))


def _fix(client: ClientOverhead) -> str:
    need = workers_needed(client)
    where = ""
    if client.cores is not None and need > client.cores:
        where = (f"; that is more than the {client.cores} cores the workers can use here: "
                 "spread them over hosts with --ray, or run the client away from the server")
    return (f"Rerun with --workers {need} (or --workers auto): the level's client CPU over "
            f"{need} workers keeps each under half a core{where}. Or lower the concurrency.")


def client_bound(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    """The first level where a worker fell behind: which, by how much, and the fix. Not
    on a level where most requests failed: a loop that spins through instant failures
    is busy without being behind (http_errors says what happened)."""
    for lv in levels:
        client = lv.client
        failed = lv.errors.total if lv.errors is not None else 0
        if client is None or failed * 2 > max(client.requests, 1):
            continue
        behind = [(w, why) for w in _workers(client) if (why := _behind(w))]
        if not behind:
            continue
        w, why = max(behind, key=lambda wb: wb[0].cpu_share)
        stream = lv.stream
        untimed = ("" if stream is None or stream.itl_measured
                   else f"; {stream.itl_reason.split(':')[0]}, so no ITL is reported there")
        return [Finding(
            "client_bound", "warning",
            f"The load generator fell behind at {lv.point.label}: {_who(w, client)} "
            f"{', '.join(why)}{untimed}. "
            "Latencies there include the client's own delay.",
            {"level": lv.point.label, "worker": w.index, "workers": client.workers,
             "cpu_share": w.cpu_share, "loop_lag_p99_s": w.loop_lag.get("p99"),
             "send_late_p99_s": w.send_late.get("p99"),
             "cpu_per_chunk_s": w.cpu_per_chunk_s, "workers_needed": workers_needed(client)},
            _fix(client))]
    return []


def load_not_delivered(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    """The load the server saw was not the one configured (by more than 5%)."""
    for lv in levels:
        c = lv.client
        if c is None or c.load_error is None or abs(c.load_error) <= LOAD_ERROR_MAX:
            continue
        if lv.point.concurrency is not None:
            what = (f"kept {c.achieved_concurrency:.1f} requests in flight on average against "
                    f"{lv.point.concurrency} clients")
        else:
            what = (f"sent {c.achieved_rate:.2f} requests/s against its schedule's "
                    f"{c.scheduled_rate:.2f} (configured {lv.point.rate:g})")
        return [Finding(
            "load_not_delivered", "warning",
            f"At {lv.point.label} the client {what}: {c.load_error:+.1%}. The level measured "
            "a lighter (or heavier) load than its label says.",
            {"level": lv.point.label, "load_error": c.load_error,
             "achieved_concurrency": c.achieved_concurrency, "achieved_rate": c.achieved_rate,
             "scheduled_rate": c.scheduled_rate},
            _fix(c) + " If no worker fell behind, the server was slow to accept requests "
            "(connections, admission): see its log and the errors table.")]
    return []


def worker_lost(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    """A worker died or fell silent mid-level: the level is incomplete."""
    hit = [lv for lv in levels if lv.client is not None and lv.client.lost]
    if not hit:
        return []
    lv = hit[0]
    assert lv.client is not None
    lost = lv.client.lost[0]
    return [Finding(
        "worker_lost", "warning",
        f"At {lv.point.label} worker {lost.index} (pid {lost.pid} on {lost.host}) was lost "
        f"mid-level ({lost.reason}); the level kept the {lost.records} requests it had "
        f"reported and is incomplete: its counts are short of the plan "
        f"({sum(len(x.client.lost) for x in hit if x.client)} lost in "
        f"{len(hit)} level(s)).",
        {"levels": [x.point.label for x in hit], "reason": lost.reason,
         "records_kept": lost.records},
        "Check that worker's host (memory, the network to the coordinator, its Ray node); "
        "rerun the level. Workers are started again before each level.")]


CLIENT_RULES = [client_bound, load_not_delivered, worker_lost]
