"""Synthetic sweep results for the gate's tests (a helper, not a test module).

`level(...)` builds one level dict from per-request ttft/tpot lists the way the
sweep does: warm-up requests first (flagged, and finished before any measured
arrival), summaries by `perfkit.summary.latency.distribution`. `doc(...)`
wraps levels in a result document; `noisy_doc(seed, ...)` draws one from fixed
distributions, so two seeds differ only by resampled noise.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from perfkit.summary.latency import distribution

NUM_WARMUP = 2
OUTPUT_TOKENS = 32  # per request; e2e = ttft + tpot * (OUTPUT_TOKENS - 1)
BASE_TTFT_S = 0.050  # at concurrency 1; grows with concurrency
BASE_TPOT_S = 0.010


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
            "pool_copy_on_writes": 0}


def level(ttft: list[float], tpot: list[float], concurrency: int | None = 1, repeat: int = 0,
          rate: float | None = None, throughput: float = 1000.0, system_share: float = 0.02,
          warmup_ttft_s: float = 0.5) -> dict[str, Any]:
    """One level and repeat; measured requests arrive after the warm-up ones finished."""
    warm = [request(i, 0.0, warmup_ttft_s, BASE_TPOT_S, warmup=True) for i in range(NUM_WARMUP)]
    start = max(r["arrival_s"] + r["e2e_s"] for r in warm)
    reqs = warm + [request(NUM_WARMUP + i, start + 0.01 * i, t, p)
                   for i, (t, p) in enumerate(zip(ttft, tpot))]
    measured = reqs[NUM_WARMUP:]
    latency = {k: distribution(r[f"{k}_s"] for r in measured).to_dict()
               for k in ("ttft", "tpot", "e2e", "queue")}
    return {
        "concurrency": concurrency, "rate": rate, "repeat": repeat,
        "counts": counts(concurrency, len(measured)),
        "latency": latency | {"itl": distribution([]).to_dict()},
        "throughput": {"window_s": 1.0, "requests_per_s": throughput / OUTPUT_TOKENS,
                       "output_tokens_per_s": throughput, "total_tokens_per_s": throughput * 4},
        "goodput": {"requests": len(measured), "good_requests": len(measured), "share": 1.0,
                    "good_per_s": throughput / OUTPUT_TOKENS, "window_s": 1.0},
        "kv": {"blocks_total": 64, "slots_total": 1024, "block_size": 16,
               "peak_blocks_used": 8 * (concurrency or 1), "peak_slots_used": 120,
               "mean_blocks_used": 6.5, "mean_slots_used": 90.25, "peak_waiting": 0,
               "timeline": {}},
        "cpu": {"available": True, "wall_s": 1.0, "user_s": 0.9, "system_s": 0.02,
                "system_share": system_share, "num_minor_faults": 100},
        "gpu": {"available": False, "peak_used_bytes": 0},
        "requests": reqs,
    }


def doc(levels: list[dict[str, Any]], sha256: str = "a" * 64,
        device_class: str = "cpu:Test CPU", resolved: dict[str, Any] | None = None,
        gate_rules: dict[str, Any] | None = None) -> dict[str, Any]:
    resolved = copy.deepcopy(resolved or {"name": "test", "engine": {"block_size": 16}})
    resolved["gate"] = {"rules": gate_rules or {}}
    repeats = max(lv["repeat"] for lv in levels) + 1 if levels else 0
    return {"schema": "perfkit.sweep/1", "kind": "sweep",
            "profile": {"name": "test", "sha256": sha256, "resolved": resolved},
            "environment": {"device_class": device_class, "device": "cpu"},
            "plan": {"repeats": repeats}, "levels": levels, "knee": None, "findings": [],
            "complete": True}


def noisy_doc(seed: int, concurrencies: tuple[int, ...] = (1, 4), repeats: int = 3,
              n: int = 100, ttft_factor: float = 1.0, tpot_factor: float = 1.0,
              **doc_kw: Any) -> dict[str, Any]:
    """Lognormal per-request noise (TTFT sigma 0.35, TPOT 0.2), a 2% run-to-run factor,
    3% throughput noise; everything else fixed. Factors plant a uniform slowdown."""
    rng = random.Random(seed)
    levels = []
    for r in range(repeats):  # interleaved like the sweep: every level, then repeat
        for c in concurrencies:
            run = rng.lognormvariate(0, 0.02)
            ttft = [BASE_TTFT_S * c**0.5 * run * ttft_factor * rng.lognormvariate(0, 0.35)
                    for _ in range(n)]
            tpot = [BASE_TPOT_S * c**0.2 * run * tpot_factor * rng.lognormvariate(0, 0.2)
                    for _ in range(n)]
            levels.append(level(ttft, tpot, c, r, throughput=1000 * c**0.8 * rng.gauss(1, 0.03),
                                system_share=0.02 + rng.gauss(0, 0.003)))
    return doc(levels, **doc_kw)
