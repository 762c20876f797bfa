"""Why a remote level's p99 is high, from the server's own request spans (--server-traces).

For TTFT and TPOT, at the level with the highest p99 of the metric among levels whose p99
requests were joined with server spans (at least MIN_JOINED requests joined in the level),
the p99 requests' client window splits into parts (summary/server_split.py):
    TTFT  the server's queue, its prefill, outside the engine (its API server + outside it)
    TPOT  (per output token) the server's decode, outside the engine
The part that fills more than MOSTLY of the window is named, with its milliseconds and the
median requests' for comparison: "p99 TTFT at concurrency 64 is mostly the server's queue:
412 of 455 ms". Where no part does, one info finding gives the shares. A named cause is a
warning when the tail matters (its window at least TAIL_WARN_RATIO times the median's, as
in-process), else info. Preemptions are not in vLLM's span; the scraped counter's delta
(--scrape-metrics) is quoted beside the cause when the server preempted.

server_traces_unjoined: a level joined fewer than MIN_JOIN_SHARE of its requests.
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.result.client_tail import ClientTailGroup
from perfkit.result.level import LevelResult
from perfkit.result.server_traces import ServerSplit
from perfkit.result.sweep import Finding
from perfkit.summary.tail_rules import MOSTLY, TAIL_WARN_RATIO

MIN_JOINED = 20  # joined requests in the level: fewer, and its p99 is one request's luck
MIN_JOIN_SHARE = 0.95
CLIENT_LAG_SHARE = 0.1  # the client's loop lag is worth naming above this share of outside
PARTS = {"ttft": ("queue", "prefill", "outside_engine"), "tpot": ("decode", "outside_engine")}
WORDS = {"queue": "the server's queue", "prefill": "the server's prefill",
         "decode": "the server's decode steps", "outside_engine": "outside the engine"}

FIXES = {
    "queue": "The server queued the p99 requests: it runs at most --max-num-seqs sequences "
             "and admits what its KV cache holds. Raise --max-num-seqs (and the KV cache: "
             "--gpu-memory-utilization, --num-gpu-blocks-override) where the device has room, "
             "add replicas, or lower the load.",
    "prefill": "The p99 requests' own prefill is long: long prompts, or their chunks shared "
               "steps with other requests. Enable prefix caching for shared prefixes, tune "
               "--max-num-batched-tokens, or serve prefill apart (disaggregated prefill).",
    "decode": "The server's decode steps are slow for the p99 requests: a wide batch, or "
              "other requests' prefill chunks in the same steps. Lower --max-num-seqs or "
              "--max-num-batched-tokens to trade throughput for TPOT, or add replicas.",
    "outside_engine": "The time goes outside the engine: the server's API process "
                      "(tokenization, detokenization, streaming; vLLM --api-server-count), a "
                      "proxy or load balancer in between (buffering or delaying chunks), or "
                      "the network. Compare with a client next to the server; check the proxy.",
}


def _part(s: ServerSplit, name: str) -> float | None:
    if name == "outside_engine":
        return s.outside_engine_s
    return {"queue": s.queue_s, "prefill": s.prefill_s, "decode": s.decode_s}[name]


def shares(s: ServerSplit, metric: str) -> dict[str, float]:
    """Part -> its share of the window (parts the server reported)."""
    if s.window_s <= 0:
        return {}
    return {p: v / s.window_s for p in PARTS[metric] if (v := _part(s, p)) is not None}


def _pick(levels: list[LevelResult], metric: str
          ) -> tuple[LevelResult, ClientTailGroup, ClientTailGroup | None] | None:
    """The level with the highest p99 of the metric among those with a joined tail."""
    found = []
    for lv in levels:
        sec, st = lv.client_tail, lv.server_traces
        tail = sec.group(metric, "tail") if sec else None
        if tail is None or tail.server is None or st is None or st.joined < MIN_JOINED:
            continue
        found.append((lv, tail, sec.group(metric, "median") if sec else None))
    return max(found, key=lambda f: f[1].threshold_s) if found else None


def _requests(n: int) -> str:
    return f"{n} request" + ("" if n == 1 else "s")


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1e3:.1f}"


def _detail(name: str, s: ServerSplit, median: ServerSplit | None, lv: LevelResult) -> str:
    words = ""
    if name == "outside_engine":
        words = (f" (the server's API process {_ms(s.api_server_s)} ms, between the server "
                 f"and perfkit {_ms(s.outside_server_s)} ms)")
    if median is not None:
        words += (f"; median requests: {_ms(_part(median, name))} of {_ms(median.window_s)} "
                  "ms")
    pre = lv.counts.preemptions
    if pre:
        words += f"; the server preempted {pre} times in the level (scraped)"
    lag = lv.client.loop_lag.get("p99") if lv.client is not None else None
    if name == "outside_engine" and lag and s.outside_server_s \
            and lag > CLIENT_LAG_SHARE * s.outside_server_s:
        words += (f"; perfkit's own event loop woke up to {lag * 1e3:.1f} ms late (p99), "
                  "part of the time outside the server (see client_bound)")
    return words


def _evidence(lv: LevelResult, metric: str, tail: ClientTailGroup,
              median: ClientTailGroup | None) -> dict[str, object]:
    st = lv.server_traces
    assert tail.server is not None and st is not None

    def parts(s: ServerSplit | None) -> dict[str, float | None] | None:
        return None if s is None else {"window_s": s.window_s, "queue_s": s.queue_s,
                                       "prefill_s": s.prefill_s, "decode_s": s.decode_s,
                                       "api_server_s": s.api_server_s,
                                       "outside_server_s": s.outside_server_s}

    return {"level": lv.point.label, "metric": metric, "p99_s": tail.threshold_s,
            "num_tail_requests": tail.num_requests, "tail_joined": tail.server.num_joined,
            "tail": parts(tail.server), "median": parts(median.server if median else None),
            "shares": {k: round(v, 3) for k, v in shares(tail.server, metric).items()},
            "joined": st.joined, "requests": st.requests, "preemptions": lv.counts.preemptions}


def _one(levels: list[LevelResult], metric: str) -> list[Finding]:
    picked = _pick(levels, metric)
    if picked is None:
        return []
    lv, tail, median = picked
    s = tail.server
    assert s is not None
    med = median.server if median is not None else None
    share = shares(s, metric)
    per = " per output token" if metric == "tpot" else ""
    ev = _evidence(lv, metric, tail, median)
    name = max(share, key=lambda p: share[p]) if share else None
    if name is None or share[name] <= MOSTLY:
        listed = ", ".join(f"{WORDS[p]} {v:.0%}" for p, v in share.items()) or "none reported"
        return [Finding(f"server_p99_{metric}_mixed", "info",
                        f"p99 {metric.upper()} at {lv.point.label} has no single dominant part "
                        f"in the server's spans; shares of the p99 requests' "
                        f"{_ms(s.window_s)} ms{per}: {listed}.", ev,
                        "Look at the parts one by one: the server-view tail table, and the "
                        "requests' server timings in the JSON (requests[].server).")]
    slow = med is not None and s.window_s >= TAIL_WARN_RATIO * med.window_s
    return [Finding(
        f"server_p99_{metric}_{name}", "warning" if slow else "info",
        f"p99 {metric.upper()} at {lv.point.label} is mostly {WORDS[name]}: "
        f"{_ms(_part(s, name))} of {_ms(s.window_s)} ms{per}{_detail(name, s, med, lv)}. "
        f"Means over the {_requests(s.num_joined)} at or above p99 joined with the server's "
        "spans.",
        ev, FIXES[name])]


def server_tail_cause(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    return _one(levels, "ttft") + _one(levels, "tpot")


def server_traces_unjoined(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    """--server-traces was on, but a level joined too few of its requests."""
    for lv in levels:
        st = lv.server_traces
        if st is None or st.receiver is None or not st.requests \
                or (st.join_share or 0.0) >= MIN_JOIN_SHARE:
            continue
        return [Finding(
            "server_traces_unjoined", "warning",
            f"At {lv.point.label}, {st.joined} of {st.requests} requests were joined with "
            f"the server's spans ({st.spans} request spans received): {st.reason}.",
            {"level": lv.point.label, "joined": st.joined, "requests": st.requests,
             "spans": st.spans, "reason": st.reason},
            "Start vLLM with --otlp-traces-endpoint http://HOST:PORT/v1/traces and "
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (HOST:PORT as --server-traces); "
            "a lower OTEL_BSP_SCHEDULE_DELAY (ms) or a longer --server-traces-wait lets late "
            "spans in.")]
    return []
