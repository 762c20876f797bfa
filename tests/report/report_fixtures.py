"""Synthetic results and page readers for the report's tests (a helper, not a test module).

`level(...)` builds one level as the typed model and returns its perfkit.sweep/2 JSON,
every number a simple function of the level, so a test can say which value belongs
where; `remote_level(...)` a level measured against a remote target; `sweep_doc(...)`
the document around them; `decode(doc)` the SweepResult a renderer takes; `as_v1(doc)`
the same result as a perfkit.sweep/1 file wrote it. `frag_doc(...)` builds a
fragmentation result. `chart_data(html)` returns {chart id: the figure's data-chart
JSON}; `png_stats(png)` decodes a PNG with zlib and numpy only and says how many
colours it holds.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np

from perfkit.fragmentation.render import SCHEMA as FRAG_SCHEMA
from perfkit.measure.cuda_mem import CudaMemStats
from perfkit.measure.gc import GcStats
from perfkit.measure.nvml import NvmlSample, NvmlStats
from perfkit.measure.proc import ProcStats
from perfkit.result import (
    Counts,
    Distribution,
    Goodput,
    GuardCounts,
    GuardSection,
    GuardTiming,
    KvSection,
    KvTimeline,
    Latency,
    LevelResult,
    SweepResult,
    Throughput,
)
from perfkit.result.codec import to_json
from perfkit.result.io import decode_result
from perfkit.result.remote import ClientOverhead, ErrorCounts, ServerMetrics
from perfkit.result.stacks import StacksInfo
from perfkit.result.sweep import SCHEMA as SWEEP_SCHEMA
from perfkit.result.sweep import SCHEMA_V1

KINDS = ("used", "reserved", "internal", "external", "free")
STEPS = [0.0, 0.1, 0.2, 0.3]
SCRAPED = "vllm:kv_cache_usage_perc (scraped)"


def dist(base: float) -> dict[str, float | int]:
    """A latency summary whose percentiles are fixed multiples of `base`."""
    return {"count": 10, "mean": base * 1.2, "stddev": base * 0.1, "min": base * 0.5,
            "p50": base, "p90": base * 1.5, "p99": base * 2.0, "max": base * 2.5}


def _latency(x: float) -> Latency:
    return Latency(**{m: Distribution(**dist(base * x)) for m, base in  # type: ignore[arg-type]
                      (("ttft", 0.010), ("tpot", 0.002), ("e2e", 0.100), ("itl", 0.002),
                       ("queue", 0.001))})


def _cpu(x: float) -> ProcStats:
    return dataclasses.replace(
        ProcStats.wall_only(1.0, ""), available=True, user_s=0.5 * x, system_s=0.05 * x,
        system_share=0.05 / 0.55, cpu_per_wall=0.55 * x, num_involuntary_ctx_switches=3,
        num_minor_faults=100 * int(x), num_major_faults=int(x) // 2, run_queue_wait_s=0.01)


def _gpu(x: float, on: bool) -> NvmlStats:
    if not on:
        return NvmlStats.unavailable("no NVIDIA driver")
    samples = [NvmlSample(t, int(2**30 * (x + t)), 50, None) for t in STEPS]
    return dataclasses.replace(
        NvmlStats.unavailable(""), available=True, device_name="Test GPU",
        memory_total_bytes=2**34, peak_used_bytes=samples[-1].used_bytes,
        mean_used_bytes=samples[0].used_bytes, samples=samples, num_samples=4)


def _counts(x: float, **extra: Any) -> Counts:
    n = int(x)
    fields: dict[str, Any] = {"preemptions": n // 4, **extra}
    return Counts(requests=10, completed=10, rejected={}, finish_reasons={"length": 10},
                  prompt_tokens=640, output_tokens=80 * n, cached_tokens=64, warmup_excluded=0,
                  **fields)


def level_result(c: int | None, repeat: int = 0, rate: float | None = None,
                 scale: float = 1.0, gpu: bool = False, svg: str | None = None) -> LevelResult:
    """An in-process level: engine steps, the block pool, the guard."""
    x = float(c if c is not None else rate or 1.0)
    n = int(x)
    used = [n * k for k in range(4)]
    stacks = None if svg is None else StacksInfo(
        sampler_used="thread", reason="", folded_path=svg.replace(".svg", ".folded"),
        speedscope_path=None, svg_path=svg, num_samples=10, duration_s=1.0, rate_hz=50.0,
        native=False)
    return LevelResult(
        concurrency=c, rate=rate, repeat=repeat,
        counts=_counts(x, steps=40 * n, batched_tokens=720 * n, pool_allocations=5 * n,
                       pool_frees=5 * n, pool_hits=4, pool_misses=36, pool_evictions=0,
                       pool_copy_on_writes=0),
        latency=_latency(x * scale * (1 + repeat / 10)),
        throughput=Throughput(1.0, 10.0 * x, 100.0 * x * scale + repeat, 740.0 * x),
        goodput=Goodput(10, 9, 0.9, 9.0, 1.0), observed_concurrency=x, prefix_hit_rate=0.1,
        kv=KvSection(available=True, source="engine block pool", blocks_total=64,
                     slots_total=1024, block_size=16, peak_blocks_used=used[-1],
                     peak_slots_used=16 * used[-1], mean_blocks_used=1.5 * n,
                     mean_slots_used=24.0 * n, usage_peak=used[-1] / 64,
                     usage_mean=1.5 * n / 64, peak_waiting=0, peak_running=n,
                     timeline=KvTimeline(list(STEPS), used, [16 * u for u in used], [1] * 4,
                                         [0] * 4)),
        guard=GuardSection(GuardCounts({"length": 10}, 0, 0), GuardTiming(0.001, 25.0)),
        cpu=_cpu(x), gc=GcStats(True, "", 2, 0.002, 0.0015), gpu=_gpu(x, gpu),
        cuda=CudaMemStats.unavailable("no CUDA"), stacks=stacks)


def level(c: int | None, repeat: int = 0, rate: float | None = None, scale: float = 1.0,
          gpu: bool = False, svg: str | None = None) -> dict[str, Any]:
    """An in-process level as perfkit.sweep/2 JSON."""
    return dict(to_json(level_result(c, repeat, rate, scale, gpu, svg)))


def remote_level(c: int, usage_peak: float | None = 0.42, preemptions: int | None = None
                 ) -> dict[str, Any]:
    """A level against a remote target, as perfkit.sweep/2 JSON: no engine steps, no
    block or slot counts, no guard; its KV section is the scraped share (None: no scrape)."""
    base = level_result(c)
    scraped = usage_peak is not None
    lv = dataclasses.replace(
        base, counts=_counts(float(c), preemptions=preemptions), guard=None,
        kv=KvSection(available=scraped, reason="" if scraped else "not scraped",
                     source=SCRAPED, usage_peak=usage_peak,
                     usage_mean=None if usage_peak is None else usage_peak / 2, peak_waiting=2,
                     peak_running=None if usage_peak is None else c),
        server=(ServerMetrics(True, "", "http://server/metrics", num_scrapes=5,
                              kv_usage_peak=usage_peak, preemptions=preemptions)
                if scraped else ServerMetrics.unavailable("not scraped")),
        errors=ErrorCounts(1, {"http-500": 1}, 0, None),
        client=ClientOverhead(cpu_s=0.1, wall_s=1.0, cpu_share=0.1, requests=10,
                              cpu_per_request_s=0.01, connections=c, lag_interval_s=0.01,
                              loop_lag={"p99": 0.002}))
    return dict(to_json(lv))


def sweep_doc(levels: list[dict[str, Any]] | None = None, knee: float | None = 2.0,
              name: str = "default") -> dict[str, Any]:
    levels = levels if levels is not None else [level(c) for c in (1, 2, 4, 8)]
    return {"schema": SWEEP_SCHEMA, "kind": "sweep",
            "profile": {"name": name, "sha256": "ab" * 32, "resolved": {}},
            "environment": {"perfkit": "0.1.0", "device_class": "cpu:test"},
            "plan": {"levels": [f"concurrency {lv['concurrency']}" for lv in levels],
                     "requests": 10, "warmup": 0, "samplers": True,
                     "repeats": 1 + max((lv["repeat"] for lv in levels), default=0)},
            "target": None,
            "levels": levels,
            "knee": None if knee is None else {"level": knee, "reason": "throughput-plateau",
                                               "sentence": f"Knee at concurrency {knee:g}.",
                                               "throughput_gain_per_doubling": []},
            "findings": [{"id": "saturation", "severity": "info", "message": "Saturated <here>.",
                          "evidence": {"level": knee}, "fix": "Cap concurrency."}],
            "complete": True}


def decode(doc: dict[str, Any]) -> SweepResult:
    return decode_result(doc, "test result")


def as_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """A /2 document as perfkit.sweep/1 wrote it: remote levels with 0 for what a client
    cannot see, no guard; in-process levels without the KV share; no remote-only keys."""
    out = copy.deepcopy(doc) | {"schema": SCHEMA_V1}
    for lv in out["levels"]:
        if lv["client"] is None:
            for key in ("server", "errors", "client"):
                del lv[key]
            for key in ("available", "reason", "source", "usage_peak", "usage_mean"):
                del lv["kv"][key]
            continue
        del lv["guard"]
        lv["counts"] |= {"steps": 0, "batched_tokens": 0,
                         "preemptions": lv["counts"]["preemptions"] or 0}
        lv["kv"] |= {k: 0 for k in ("blocks_total", "slots_total", "block_size",
                                    "peak_blocks_used", "peak_slots_used", "mean_blocks_used",
                                    "mean_slots_used")}
        for req in lv["requests"]:
            req["preemptions"] = 0
    return out


def policy(name: str, used: float, internal: float) -> dict[str, Any]:
    free = 1.0 - used - internal - 0.1
    return {"name": name, "kind": "paged" if name.startswith("paged") else "contiguous",
            "used": used, "reserved": 0.1, "internal": internal, "external": 0.0, "free": free}


def frag_doc(live: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": FRAG_SCHEMA, "profile": {"name": "default", "sha256": "cd" * 32},
        "budget": {"slots": 8192}, "recommendation": {"block_size": 16, "reason": "fits"},
        "policies": [policy("reserve-max", 0.2, 0.6), policy("paged-16", 0.6, 0.02)],
        "live": None}
    if live:
        doc["live"] = {"engine": policy("engine", 0.55, 0.03), "replays": []}
    return doc


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


class _Figures(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, Any] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("data-chart") is not None:
            self.data[str(a["id"]).removeprefix("chart-")] = json.loads(str(a["data-chart"]))


def chart_data(html: str) -> dict[str, Any]:
    parser = _Figures()
    parser.feed(html)
    return parser.data


def _unfilter_row(row: list[int], prev: list[int], bpp: int, kind: int) -> np.ndarray:
    cur = list(row)
    for i in range(len(row)):
        a = cur[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if kind == 3:
            pred = (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        cur[i] = (row[i] + pred) % 256
    return np.array(cur, dtype=np.int32)


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> np.ndarray:
    """Undo PNG's per-row filters (None, Sub, Up, Average, Paeth) -> [height, width*bpp]."""
    stride = width * bpp
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        row = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        if kind == 0:
            cur = row
        elif kind == 2:
            cur = (row + prev) % 256
        elif kind == 1:  # Sub: a running sum per channel
            cur = np.cumsum(row.reshape(width, bpp), axis=0).reshape(-1) % 256
        else:  # Average, Paeth: sequential along the row (slow; Chromium's fast mode avoids them)
            cur = _unfilter_row(row.tolist(), prev.tolist(), bpp, kind)
        out[y] = cur
        prev = cur
    return out


def png_pixels(png: bytes) -> np.ndarray:
    """8-bit RGB or RGBA PNG (what Chromium writes) -> [height, width, channels] uint8."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,), kind = struct.unpack(">I", png[pos:pos + 4]), png[pos + 4:pos + 8]
        body = png[pos + 8:pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 3 if color == 2 else 4
    rows = _unfilter(zlib.decompress(idat), width, height, bpp)
    return rows.reshape(height, width, bpp).astype(np.uint8)


def png_stats(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of pixels that differ from the most common colour)."""
    px = png_pixels(png)[..., :3].reshape(-1, 3).astype(np.uint32)
    packed = (px[:, 0] << 16) | (px[:, 1] << 8) | px[:, 2]
    counts = np.bincount(np.unique(packed, return_inverse=True)[1])
    return len(counts), float(1.0 - counts.max() / counts.sum())
