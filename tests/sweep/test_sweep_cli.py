"""`perfkit sweep` end to end on a tiny profile: JSON schema, determinism, interruption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

SCHEMA = json.loads((Path(__file__).parents[2] / "perfkit/result/sweep.schema.json").read_text())


def run_tiny(cli, tiny, tmp_path: Path, *extra: str):
    path = tmp_path / "r.json"
    result = cli("sweep", *tiny, "--json", str(path), *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(path.read_text()), result


def test_sweep_writes_valid_result(cli, tiny, tmp_path):
    doc, result = run_tiny(cli, tiny, tmp_path)
    jsonschema.validate(doc, SCHEMA)
    assert doc["complete"] is True
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 4]
    level = doc["levels"][0]
    assert level["counts"]["requests"] == 6  # warm-up excluded, the rest all measured
    assert sum(r["warmup"] for r in level["requests"]) == 2
    assert level["counts"]["output_tokens"] == 6 * 8
    assert level["latency"]["ttft"]["count"] == 6
    assert level["latency"]["tpot"]["p50"] > 0
    assert "Timings (noisy)" in result.stdout and "Counts (deterministic)" in result.stdout
    assert "Knee:" in result.stdout


MACHINE_DEPENDENT = {"cpu_contention", "high_kernel_time", "gc_pauses"}  # other load here


def test_default_profile_has_no_workload_findings(cli, tmp_path):
    path = tmp_path / "d.json"
    result = cli("sweep", "--requests", "8", "--warmup", "1", "--json", str(path),
                 "--set", "sweep.min_requests_per_client=0")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(path.read_text())
    found = {f["id"] for f in doc["findings"] if f["severity"] == "warning"}
    assert not found - MACHINE_DEPENDENT, doc["findings"]


def test_counts_are_deterministic(cli, tiny, tmp_path):
    a, _ = run_tiny(cli, tiny, tmp_path / "a")
    b, _ = run_tiny(cli, tiny, tmp_path / "b")
    assert [lv["counts"] for lv in a["levels"]] == [lv["counts"] for lv in b["levels"]]
    assert [lv["kv"]["peak_blocks_used"] for lv in a["levels"]] == \
        [lv["kv"]["peak_blocks_used"] for lv in b["levels"]]
    assert a["profile"]["sha256"] == b["profile"]["sha256"]


def test_formats_and_out_dir(cli, tiny, tmp_path):
    out = tmp_path / "out"
    result = cli("sweep", *tiny, "--out", str(out), "--format", "csv", "--report")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("concurrency,rate,repeat") and len(lines) == 3
    assert (out / "result.json").exists() and (out / "summary.md").exists()
    assert "| level |" in (out / "summary.md").read_text()
    assert 'id="chart-throughput"' in (out / "result.html").read_text()
    result = cli("sweep", *tiny, "--format", "json")
    assert json.loads(result.stdout)["schema"] == "perfkit.sweep/2"


def test_open_loop_rate_level(cli, tiny, tmp_path):
    doc, _ = run_tiny(cli, tiny, tmp_path, "--rate", "50")
    rates = [lv["rate"] for lv in doc["levels"]]
    assert 50.0 in rates
    level = doc["levels"][-1]
    assert level["observed_concurrency"] > 0
    assert level["counts"]["requests"] == 6  # warm-up ran first: every measured one counts
    arrivals = sorted(r["arrival_s"] for r in level["requests"] if not r["warmup"])
    assert arrivals[-1] - arrivals[0] > 0  # poisson offsets, not all at once


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--concurrency", "1,x"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency"),
        (["--device", "tpu"], "engine.device"),
        (["--format", "xml"], "--format"),
        (["--requests", "0"], "--requests"),
        (["--profile", "nope"], "nope"),
        (["--set", "engine.block_sise=3"], "block_size"),
        (["--model", "llama3-70b"], "needs"),
        (["--report"], "--report needs"),
    ],
)
def test_bad_input_exit_2(cli, args, needle):
    result = cli("sweep", "--requests", "2", *args)
    assert result.exit_code == 2, (args, result.stdout)
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_refuses_to_overwrite_without_force(cli, tiny, tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{}")
    result = cli("sweep", *tiny, "--json", str(path))
    assert result.exit_code == 2 and "--force" in result.stderr


def test_sigint_keeps_completed_levels(tiny, tmp_path):
    path = tmp_path / "r.json"
    args = [sys.executable, "-m", "perfkit", "sweep", *tiny, "--concurrency", "1,2,4,8",
            "--requests", "12", "--json", str(path)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if path.exists() and json.loads(path.read_text())["levels"]:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    doc = json.loads(path.read_text())
    assert doc["complete"] is False
    assert 1 <= len(doc["levels"]) < 4
    jsonschema.validate(doc, SCHEMA)
    assert "Traceback" not in err
    assert os.path.getsize(path) > 0


@pytest.mark.parametrize(
    ("args", "finding"),
    [
        (["--set", "engine.num_blocks=24", "--concurrency", "8"], "kv_pressure"),
        (["--profile", "shared-prefix", "--set", "engine.prefix_caching=false"],
         "prefix_caching_off"),
        (["--set", "engine.block_size=128", "--set", "engine.num_blocks=64"],
         "internal_fragmentation"),
    ],
)
def test_findings_fire_on_crafted_profiles(cli, tmp_path, args, finding):
    path = tmp_path / "f.json"
    result = cli("sweep", "--requests", "8", "--warmup", "1", "--concurrency", "8",
                 "--set", "sweep.min_requests_per_client=0",
                 "--json", str(path), *args)
    assert result.exit_code == 0, result.stderr
    ids = {f["id"] for f in json.loads(path.read_text())["findings"]}
    assert finding in ids
