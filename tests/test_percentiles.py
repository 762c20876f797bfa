"""Percentiles chosen by the user: in the JSON, the tables and the gate's catalogue."""

from __future__ import annotations

import json

import pytest

from perfkit.gate.rules import default_rules, metrics_for
from perfkit.summary.latency import distribution


def test_distribution_carries_every_chosen_percentile():
    d = distribution([float(i) for i in range(1, 101)], percentiles=(95, 99.9))
    assert d.quantiles == {"p95": pytest.approx(95.05), "p99.9": pytest.approx(99.901)}
    assert distribution([1.0, 2.0]).quantiles == {}


def test_the_gate_catalogue_grows_with_the_runs_percentiles():
    metrics = metrics_for({"sweep": {"percentiles": [50, 95, 99.9]}})
    assert {"ttft_p95", "tpot_p95", "e2e_p95", "ttft_p99.9"} <= set(metrics)
    assert metrics["tpot_p99.9"].q == 99.9 and metrics["ttft_p95"].sample == "ttft_s"
    rules = default_rules(metrics)
    assert rules["ttft_p95"].required is False and rules["ttft_p95"].direction == "lower"
    assert set(metrics_for({})) == set(metrics_for({"sweep": {"percentiles": [50, 99]}}))


def test_sweep_percentiles_end_to_end(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("sweep", "--concurrency", "1", "--requests", "8", "--warmup", "1",
                 "--percentiles", "50,95,99.9", "--set", "sweep.min_requests_per_client=0",
                 "--set", "engine.cpu_threads=1", "--json", str(out))
    assert result.exit_code == 0, result.stderr
    assert "p99.9 ms" in result.stdout  # the timings table shows the highest chosen
    ttft = json.loads(out.read_text())["levels"][0]["latency"]["ttft"]
    assert set(ttft["quantiles"]) == {"p50", "p95", "p99.9"}


@pytest.mark.parametrize("bad", ["100", "0,50", "nan", "50,x"])
def test_bad_percentiles_are_one_line_and_exit_2(cli, bad):
    result = cli("sweep", "--percentiles", bad)
    assert result.exit_code == 2 and "--percentiles" in result.stderr
