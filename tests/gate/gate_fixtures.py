"""Synthetic sweep results for the gate's tests (a helper, not a test module).

`level(...)` builds one perfkit.sweep/2 level dict from per-request ttft/tpot lists the
way the sweep does: warm-up requests first (flagged, and finished before any measured
arrival), summaries by `perfkit.summary.latency.distribution`. `remote(level)` turns it
into what a remote target measures (None where a client cannot see). `doc(...)` wraps
levels in a result document; `noisy_doc(seed, ...)` draws one from fixed distributions,
so two seeds differ only by resampled noise. `as_v1(doc)` writes a document as
perfkit.sweep/1 did (zeros where nothing was measured). Every document decodes through
perfkit.result.io (`run` decodes, then gates).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path
from typing import Any

from perfkit.gate.compare import GateResult, GateRow
from perfkit.gate.evaluate import evaluate
from perfkit.gate.inputs import decode
from perfkit.measure.cuda_mem import CudaMemStats
from perfkit.measure.gc import GcStats
from perfkit.measure.nvml import NvmlStats
from perfkit.measure.proc import ProcStats
from perfkit.result.codec import to_json
from perfkit.result.remote import ClientOverhead, ServerMetrics
from perfkit.summary.latency import distribution

NUM_WARMUP = 2
OUTPUT_TOKENS = 32  # per request; e2e = ttft + tpot * (OUTPUT_TOKENS - 1)
BASE_TTFT_S = 0.050  # at concurrency 1; grows with concurrency
BASE_TPOT_S = 0.010
PATHS = (Path("base.json"), Path("cur.json"))
POOL = ("pool_allocations", "pool_frees", "pool_hits", "pool_misses", "pool_evictions",
        "pool_copy_on_writes")
SHARING_KV = ("mean_blocks_shared", "peak_blocks_shared", "mean_blocks_saved",
              "peak_blocks_saved")
KV_BLOCKS = ("blocks_total", "slots_total", "block_size", "peak_blocks_used",
             "peak_slots_used", "mean_blocks_used", "mean_slots_used", *SHARING_KV)


def run(base: dict, cur: dict, **kw: Any) -> GateResult:
    """The gate on two documents, each decoded as load_result decodes a file."""
    return evaluate(decode(base, str(PATHS[0])), decode(cur, str(PATHS[1])), PATHS, **kw)


def row(result: GateResult, level: str, metric: str) -> GateRow:
    (found,) = [r for r in result.rows if r.level == level and r.metric == metric]
    return found


def request(rid: int, arrival_s: float, ttft_s: float, tpot_s: float,
            warmup: bool = False) -> dict[str, Any]:
    e2e = ttft_s + tpot_s * (OUTPUT_TOKENS - 1)
    return {"id": rid, "warmup": warmup, "arrival_s": arrival_s, "prompt_tokens": 100,
            "output_tokens": OUTPUT_TOKENS, "cached_tokens": 0, "preemptions": 0,
            "rejected": None, "finish_reason": "length", "ttft_s": ttft_s, "tpot_s": tpot_s,
            "e2e_s": e2e, "queue_s": 0.0, "itl_s": []}


def counts(concurrency: int | None, num: int) -> dict[str, Any]:
    """Deterministic counts: a function of the level and request count only."""
    c = concurrency or 1
    return {"requests": num, "completed": num, "rejected": {}, "finish_reasons": {"length": num},
            "preemptions": c // 4, "prompt_tokens": 100 * num, "output_tokens": OUTPUT_TOKENS * num,
            "cached_tokens": 0, "warmup_excluded": NUM_WARMUP, "steps": 40 * num // c,
            "batched_tokens": 132 * num, "pool_allocations": 9 * num, "pool_frees": 9 * num,
            "pool_hits": 3 * c, "pool_misses": 9 * num, "pool_evictions": 0,
            "pool_copy_on_writes": 0, "outputs": num}


def _cpu(system_share: float) -> dict[str, Any]:
    stats = dataclasses.replace(ProcStats.wall_only(1.0, ""), available=True, user_s=0.9,
                                system_s=0.02, system_share=system_share, num_minor_faults=100)
    return to_json(stats)


def level(ttft: list[float], tpot: list[float], concurrency: int | None = 1, repeat: int = 0,
          rate: float | None = None, throughput: float = 1000.0, system_share: float = 0.02,
          warmup_ttft_s: float = 0.5) -> dict[str, Any]:
    """One level and repeat; measured requests arrive after the warm-up ones finished."""
    warm = [request(i, 0.0, warmup_ttft_s, BASE_TPOT_S, warmup=True) for i in range(NUM_WARMUP)]
    start = max(r["arrival_s"] + r["e2e_s"] for r in warm)
    reqs = warm + [request(NUM_WARMUP + i, start + 0.01 * i, t, p)
                   for i, (t, p) in enumerate(zip(ttft, tpot))]
    measured = reqs[NUM_WARMUP:]
    latency = {k: to_json(distribution(r[f"{k}_s"] for r in measured))
               for k in ("ttft", "tpot", "e2e", "queue")}
    peak = 8 * (concurrency or 1)
    return {
        "concurrency": concurrency, "rate": rate, "repeat": repeat,
        "counts": counts(concurrency, len(measured)),
        "latency": latency | {"itl": to_json(distribution([]))},
        "throughput": {"window_s": 1.0, "requests_per_s": throughput / OUTPUT_TOKENS,
                       "output_tokens_per_s": throughput, "total_tokens_per_s": throughput * 4},
        "goodput": {"requests": len(measured), "good_requests": len(measured), "share": 1.0,
                    "good_per_s": throughput / OUTPUT_TOKENS, "window_s": 1.0},
        "observed_concurrency": float(concurrency or 1), "prefix_hit_rate": 0.0,
        "kv": {"available": True, "reason": "", "source": "engine block pool",
               "blocks_total": 64, "slots_total": 1024, "block_size": 16,
               "peak_blocks_used": peak, "peak_slots_used": 120, "mean_blocks_used": 6.5,
               "mean_slots_used": 90.25, "usage_peak": peak / 64, "usage_mean": 6.5 / 64,
               "peak_waiting": 0, "timeline": {}, "mean_blocks_shared": 0.5,
               "peak_blocks_shared": 1, "mean_blocks_saved": 0.5, "peak_blocks_saved": 1},
        "guard": None,
        "cpu": _cpu(system_share),
        "gc": to_json(GcStats.disabled("off in tests")),
        "gpu": to_json(NvmlStats.unavailable("no GPU in tests")),
        "cuda": to_json(CudaMemStats.unavailable("no CUDA in tests")),
        "requests": reqs,
    }


def remote(lv: dict[str, Any], scraped: bool = False) -> dict[str, Any]:
    """The level as a remote target reports it: no engine steps, pool counters, KV block
    counts or per-request preemptions; the server's preemptions and prefix hits only when
    scraped."""
    out = copy.deepcopy(lv)
    c = out["counts"]
    c |= {"steps": None, "batched_tokens": None, "preemptions": c["preemptions"] if scraped
          else None} | dict.fromkeys(POOL)
    server = ServerMetrics(
        True, "", "http://127.0.0.1:8000/metrics", num_scrapes=10, kv_usage_peak=0.25,
        kv_usage_mean=0.1, peak_running=2, peak_waiting=0, preemptions=c["preemptions"],
        prefix_queries=1000, prefix_hits=3 * (lv["concurrency"] or 1), prefix_hit_rate=0.5,
    ) if scraped else ServerMetrics.unavailable("not scraped (no --scrape-metrics)")
    out["kv"] = {"available": scraped, "reason": "" if scraped else server.reason,
                 "source": "vllm:kv_cache_usage_perc (scraped)", "timeline": {},
                 "usage_peak": server.kv_usage_peak, "usage_mean": server.kv_usage_mean,
                 "peak_waiting": server.peak_waiting} | dict.fromkeys(KV_BLOCKS)
    for req in out["requests"]:
        req |= {"preemptions": None, "queue_s": None, "error": None}
    out["latency"]["queue"] = to_json(distribution([]))
    out["server"] = to_json(server)
    out["errors"] = {"total": 0, "by_kind": {}, "warmup": 0, "retry_after_s_max": None}
    out["client"] = to_json(ClientOverhead(0.1, 1.0, 0.1, len(out["requests"]), 0.001,
                                           lv["concurrency"], 0.01, {"count": 0}))
    return out


def as_v1(d: dict[str, Any]) -> dict[str, Any]:
    """The same run as perfkit.sweep/1 wrote it (see perfkit.result.upgrade): remote levels
    with zeros for steps, KV blocks and unscraped preemptions, no guard or pool counters;
    in-process KV without available/source/usage."""
    out = copy.deepcopy(d) | {"schema": "perfkit.sweep/1"}
    for lv in out["levels"]:
        del lv["counts"]["outputs"]  # v1 never had several outputs, nor measured sharing
        for key in SHARING_KV:
            lv["kv"].pop(key, None)
        kv = lv["kv"]
        if "client" not in lv:
            for key in ("available", "source", "usage_peak", "usage_mean"):
                del kv[key]
            continue
        c = lv["counts"]
        c |= {"steps": 0, "batched_tokens": 0, "preemptions": c["preemptions"] or 0}
        for key in POOL:
            del c[key]
        kv |= dict.fromkeys(KV_BLOCKS[:-len(SHARING_KV)], 0) | {
            "peak_waiting": kv["peak_waiting"] or 0}
        for req in lv["requests"]:
            req["preemptions"] = 0
        del lv["guard"]
    return out


def doc(levels: list[dict[str, Any]], sha256: str = "a" * 64,
        device_class: str = "cpu:Test CPU", resolved: dict[str, Any] | None = None,
        gate_rules: dict[str, Any] | None = None) -> dict[str, Any]:
    resolved = copy.deepcopy(resolved or {"name": "test", "engine": {"block_size": 16}})
    resolved["gate"] = {"rules": gate_rules or {}}
    repeats = max(lv["repeat"] for lv in levels) + 1 if levels else 0
    labels = list(dict.fromkeys(f"c={lv['concurrency']}" if lv["rate"] is None
                                else f"{lv['rate']:g}/s" for lv in levels))
    return {"schema": "perfkit.sweep/2", "kind": "sweep",
            "profile": {"name": "test", "sha256": sha256, "resolved": resolved},
            "environment": {"device_class": device_class, "device": "cpu"},
            "plan": {"levels": labels, "requests": len(levels[0]["requests"]) if levels else 0,
                     "warmup": NUM_WARMUP, "repeats": repeats, "samplers": True},
            "target": None, "levels": levels, "knee": None, "findings": [], "complete": True}


def noisy_doc(seed: int, concurrencies: tuple[int, ...] = (1, 4), repeats: int = 6,
              n: int = 100, ttft_factor: float = 1.0, tpot_factor: float = 1.0,
              **doc_kw: Any) -> dict[str, Any]:
    """The same seeded workload every time (per-request TTFT spread sigma 0.35, TPOT 0.2,
    as prompt and output lengths give) on a machine whose speed drifts 10% from run to
    run alike for every document (what interleaving pairs share), measured with
    `seed`'s noise: 1% per run, 3% per request, 1% throughput. Factors plant a uniform
    slowdown."""
    work = random.Random(0)
    shape = {c: [(work.lognormvariate(0, 0.35), work.lognormvariate(0, 0.2)) for _ in range(n)]
             for c in concurrencies}
    drift = [work.lognormvariate(0, 0.10) for _ in range(repeats * len(concurrencies))]
    rng = random.Random(seed)
    levels = []
    for r in range(repeats):  # interleaved like the sweep: every level, then repeat
        for c in concurrencies:
            shift = drift[len(levels)] * rng.lognormvariate(0, 0.01)
            ttft = [BASE_TTFT_S * c**0.5 * shift * ttft_factor * a * rng.lognormvariate(0, 0.03)
                    for a, _ in shape[c]]
            tpot = [BASE_TPOT_S * c**0.2 * shift * tpot_factor * b * rng.lognormvariate(0, 0.03)
                    for _, b in shape[c]]
            throughput = 1000 * c**0.8 / shift * rng.gauss(1, 0.01)
            levels.append(level(ttft, tpot, c, r, throughput=throughput,
                                system_share=0.02 + rng.gauss(0, 0.003)))
    return doc(levels, **doc_kw)


def remote_doc(seed: int, scraped: bool = False, **kw: Any) -> dict[str, Any]:
    """noisy_doc's run against a remote target (device class remote:test)."""
    d = noisy_doc(seed, device_class="remote:test", **kw)
    d["levels"] = [remote(lv, scraped) for lv in d["levels"]]
    d["target"] = {"url": "http://127.0.0.1:8000/v1", "model": "test",
                   "scrape_metrics": "http://127.0.0.1:8000/metrics" if scraped else None}
    return d
