"""The guard section of a sweep level: requests ended by reason, tool calls, invalid ones
(0 with the guard on), guard time apart from the counts; and `perfkit bench --only guard`."""

from __future__ import annotations

import json

TOOL_CALLS = ["--profile", "tool-calls", "--concurrency", "4", "--requests", "8",
              "--warmup", "1", "--set", "engine.cpu_threads=1",
              "--set", "sweep.min_requests_per_client=0"]


def sweep_level(cli, tmp_path, *extra: str) -> dict:
    path = tmp_path / "r.json"
    result = cli("sweep", *TOOL_CALLS, "--json", str(path), *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(path.read_text())["levels"][0]


def test_guard_section_counts_and_timing(cli, tmp_path):
    level = sweep_level(cli, tmp_path)
    guard = level["guard"]
    counts = guard["counts"]
    assert counts["invalid_tool_calls"] == 0 and counts["tool_calls"] > 0
    assert counts["ended"]["stop"] == counts["tool_calls"]
    assert sum(counts["ended"].values()) == level["counts"]["requests"]
    reasons = level["counts"]["finish_reasons"]
    assert all(reasons.get(r, 0) == n for r, n in counts["ended"].items())
    assert guard["timing"]["guard_s"] > 0 and guard["timing"]["us_per_step"] > 0


def test_guard_off_shows_invalid_tool_calls(cli, tmp_path):
    counts = sweep_level(cli, tmp_path, "--set", "engine.guard=false")["guard"]["counts"]
    assert counts["invalid_tool_calls"] == counts["tool_calls"] > 0
    assert counts["ended"] == {"stop": 0, "loop": 0, "length": 8}


def test_bench_guard_section(cli, tmp_path):
    path = tmp_path / "b.json"
    result = cli("bench", "--only", "guard", "--device", "cpu", "--json", str(path))
    assert result.exit_code == 0, result.stderr
    guard = json.loads(path.read_text())["guard"]
    assert guard["us_per_step_on"] > 0 and guard["us_per_step_off"] > 0
    assert guard["overhead_us_per_step"] == guard["us_per_step_on"] - guard["us_per_step_off"]
    assert guard["invalid_tool_calls"] == 0 and guard["tool_calls"] > 0
    assert "guard µs per decode step" in result.stdout
