"""A sweep result as CSV: one row per level in base units (seconds, per second), for
spreadsheets. A value the level did not measure (or that does not apply: the rate of
a closed-loop level) is `n/a`, which spreadsheets and pandas read as missing."""

from __future__ import annotations

import csv
import io
from typing import Any

from perfkit.report.cells import NA
from perfkit.result import Distribution, LevelResult, SweepResult

METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = ("p50", "p90", "p99", "max", "mean", "stddev")
HEADER = [
    "concurrency", "rate", "repeat", "requests_per_s", "output_tokens_per_s", "goodput_share",
    *(f"{m}_{s}_s" for m in METRICS for s in STATS),
    "preemptions", "peak_blocks_used", "blocks_total", "prefix_hit_rate",
    "user_s", "system_s", "minor_faults",
    "outputs", "mean_blocks_shared", "mean_blocks_saved", "copy_on_writes", "memory_saving",
]


def _row(lv: LevelResult) -> list[Any]:
    dists: list[Distribution] = [getattr(lv.latency, m) for m in METRICS]
    cpu = lv.cpu
    sampled = cpu.available  # the process sampler ran; else its figures are zeros
    return [
        lv.concurrency, lv.rate, lv.repeat, lv.throughput.requests_per_s,
        lv.throughput.output_tokens_per_s, lv.goodput.share,
        *(getattr(d, s) for d in dists for s in STATS),
        lv.counts.preemptions, lv.kv.peak_blocks_used, lv.kv.blocks_total, lv.prefix_hit_rate,
        *((cpu.user_s, cpu.system_s, cpu.num_minor_faults) if sampled else (None,) * 3),
        lv.counts.outputs, lv.kv.mean_blocks_shared, lv.kv.mean_blocks_saved,
        lv.counts.pool_copy_on_writes, lv.kv.memory_saving,
    ]


def csv_text(result: SweepResult) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(HEADER)
    for lv in result.levels:
        writer.writerow([NA if v is None else v for v in _row(lv)])
    return buf.getvalue()
