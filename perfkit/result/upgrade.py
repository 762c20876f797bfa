"""Read perfkit.sweep/1 documents as /2: what v1 wrote as 0 but never measured becomes null.

v1 remote levels (they carry `client`) wrote engine steps, batched tokens and KV block
and slot counts as 0, and preemptions as 0 when nothing was scraped; per-request
preemptions and queue times were client-side zeros and nulls. v1 in-process levels had
no KV `available`/`source`/`usage_*` fields: they are derived from the block counts.
v1 requests had one output each: `counts.outputs` is the served requests; blocks shared
and saved were never measured (null).
"""

from __future__ import annotations

import copy
from typing import Any

KV_BLOCK_FIELDS = ("blocks_total", "slots_total", "block_size", "peak_blocks_used",
                   "peak_slots_used", "mean_blocks_used", "mean_slots_used")


def _remote_level(lv: dict[str, Any]) -> None:
    counts, server = lv.get("counts", {}), lv.get("server") or {}
    counts["steps"] = counts["batched_tokens"] = None
    scraped = server.get("preemptions")
    counts["preemptions"] = scraped
    for req in lv.get("requests", []):
        req["preemptions"] = None
    kv = lv.get("kv", {})
    for key in KV_BLOCK_FIELDS:
        kv[key] = None
    kv.setdefault("source", "vllm:kv_cache_usage_perc (scraped)")
    if not kv.get("available"):
        kv["peak_waiting"] = server.get("peak_waiting")
    kv["timeline"] = {}
    lv["guard"] = None


def _local_level(lv: dict[str, Any]) -> None:
    kv = lv.get("kv", {})
    kv.setdefault("available", True)
    kv.setdefault("source", "engine block pool")
    total, peak = kv.get("blocks_total"), kv.get("peak_blocks_used")
    if isinstance(total, int) and total > 0 and isinstance(peak, (int, float)):
        kv.setdefault("usage_peak", peak / total)
        mean = kv.get("mean_blocks_used")
        if isinstance(mean, (int, float)):
            kv.setdefault("usage_mean", mean / total)


def upgrade_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of a v1 document in the v2 layout (the input is not changed)."""
    out = copy.deepcopy(doc)
    levels = out.get("levels")
    for lv in levels if isinstance(levels, list) else []:
        if not isinstance(lv, dict):
            continue
        if "client" in lv:
            _remote_level(lv)
        else:
            _local_level(lv)
        counts = lv.get("counts")
        if isinstance(counts, dict) and "outputs" not in counts:
            served = counts.get("requests", 0) - sum((counts.get("rejected") or {}).values())
            counts["outputs"] = served
    out["schema"] = "perfkit.sweep/2"
    return out
