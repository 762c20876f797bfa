"""Repeats of a level render as one row: counts once, timings as mean ± σ."""

from __future__ import annotations

from levels import level

from perfkit.report.cells import aggregate
from perfkit.report.tables import COUNTS, TIMINGS, rows
from perfkit.result.sweep import Plan, ProfileInfo, SweepResult


def _result(levels):
    return SweepResult(profile=ProfileInfo("t", "0", {}), environment={},
                       plan=Plan(["concurrency 1"], 8, 1, len(levels), True), levels=levels)


def test_aggregate_cells():
    assert aggregate(["1.0", "1.2", "1.4"]) == "1.2 ± 0.2"
    assert aggregate(["100%", "98%"]) == "99 ± 1%"
    assert aggregate(["32", "32"]) == "32"
    assert aggregate(["15/512", "16/512"]) == "15/512 … 16/512"
    assert aggregate(["n/a", "n/a"]) == "n/a"


def test_repeats_are_one_row():
    levels = [level({"concurrency": 1, "repeat": r, "counts": {"requests": 8},
                     "throughput": {"requests_per_s": 10.0 + 2 * r}}) for r in range(3)]
    _, body = rows(_result(levels), TIMINGS)
    assert len(body) == 1
    assert body[0][:2] == ["c=1 (3 runs)", "12.00 ± 2.00"]
    _, counts = rows(_result(levels), COUNTS)
    assert counts[0][1] == "8"
