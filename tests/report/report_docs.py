"""Synthetic results and page readers for the report's tests (a helper, not a test module).

`sweep_doc(...)` builds a sweep result with the fields the report reads, every
number a simple function of the level, so a test can say which value belongs
where; `frag_doc(...)` a fragmentation result. `chart_data(html)` returns
{chart id: the figure's data-chart JSON}; `png_stats(png)` decodes a PNG with
zlib and numpy only and says how many colours it holds.
"""

from __future__ import annotations

import json
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np

from perfkit.fragmentation.render import SCHEMA as FRAG_SCHEMA
from perfkit.sweep.result import SCHEMA as SWEEP_SCHEMA

KINDS = ("used", "reserved", "internal", "external", "free")


def dist(base: float) -> dict[str, float | int]:
    """A latency summary whose percentiles are fixed multiples of `base`."""
    return {"count": 10, "mean": base * 1.2, "stddev": base * 0.1, "min": base * 0.5,
            "p50": base, "p90": base * 1.5, "p99": base * 2.0, "max": base * 2.5}


def level(c: int | None, repeat: int = 0, rate: float | None = None, scale: float = 1.0,
          gpu: bool = False, svg: str | None = None) -> dict[str, Any]:
    x = float(c if c is not None else rate or 1.0)
    steps = [0.0, 0.1, 0.2, 0.3]
    lv: dict[str, Any] = {
        "concurrency": c, "rate": rate, "repeat": repeat,
        "throughput": {"output_tokens_per_s": 100.0 * x * scale + repeat},
        "latency": {m: dist(base * x * scale * (1 + repeat / 10)) for m, base in
                    (("ttft", 0.010), ("tpot", 0.002), ("e2e", 0.100), ("itl", 0.002),
                     ("queue", 0.001))},
        "kv": {"blocks_total": 64, "timeline": {
            "t_s": steps, "blocks_used": [int(x) * k for k in range(4)],
            "slots_used": [16 * int(x) * k for k in range(4)], "running": [1] * 4,
            "waiting": [0] * 4}},
        "cpu": {"available": True, "user_s": 0.5 * x, "system_s": 0.05 * x,
                "num_minor_faults": 100 * int(x), "num_major_faults": int(x) // 2},
        "gpu": {"available": gpu, "reason": "" if gpu else "no NVIDIA driver",
                "timeline": [{"t_s": t, "used_bytes": int(2**30 * (x + t)), "util_pct": 50,
                              "process_bytes": None} for t in steps] if gpu else []},
    }
    if svg is not None:
        lv["stacks"] = {"svg_path": svg, "folded_path": svg.replace(".svg", ".folded")}
    return lv


def sweep_doc(levels: list[dict[str, Any]] | None = None, knee: float | None = 2.0,
              name: str = "default") -> dict[str, Any]:
    levels = levels if levels is not None else [level(c) for c in (1, 2, 4, 8)]
    return {"schema": SWEEP_SCHEMA, "kind": "sweep",
            "profile": {"name": name, "sha256": "ab" * 32, "resolved": {}},
            "environment": {"perfkit": "0.1.0", "device_class": "cpu:test"},
            "plan": {"repeats": 1 + max((lv["repeat"] for lv in levels), default=0)},
            "levels": levels,
            "knee": None if knee is None else {"level": knee, "reason": "throughput-plateau",
                                               "sentence": f"Knee at concurrency {knee:g}."},
            "findings": [{"id": "saturation", "severity": "info", "message": "Saturated <here>.",
                          "evidence": {"level": knee}, "fix": "Cap concurrency."}],
            "complete": True}


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
