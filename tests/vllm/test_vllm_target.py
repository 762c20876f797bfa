"""`perfkit sweep --target` against a real vLLM (CPU build, tiny model, 24 blocks of 32).

One saturating sweep (concurrency 1 and 16, prompts of one block, no warm-up, so the
server's own counters over the whole sweep are the sum of the levels'): preemptions
exactly the server's, a KV peak above 0.9 at saturation, a timeline of real samples, and
no prefix hits at any level (every level draws fresh prompts; the server's prefix cache is
on, vLLM's default).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from vllm_server import MODEL_NAME, VllmServer

from perfkit.remote.scrape import parse_metrics

# One-block prompts: vLLM admits a waiting request only when its whole prompt fits, so
# with short prompts at most a block stays free while requests wait and the pool reads
# full (>= 22 of 23 blocks) for most of the level, not only at the instants of preemption.
# Outputs of three blocks: at concurrency 16 the running requests want 64 blocks of 23.
SHORT_PROMPTS = ("--set", "workload.prompt_len.kind=fixed", "--set", "workload.prompt_len.mean=32",
                 "--set", "workload.output_len.kind=fixed", "--set", "workload.output_len.mean=48")
COUNTERS = ("vllm:num_preemptions", "vllm:prefix_cache_hits", "vllm:prefix_cache_queries")


def counters(server: VllmServer) -> dict[str, float]:
    with urllib.request.urlopen(f"{server.base}/metrics", timeout=10) as resp:
        values = parse_metrics(resp.read().decode(), COUNTERS)
    return {name: sum(values.get(name, [0.0])) for name in COUNTERS}


@pytest.fixture(scope="module")
def sweep(vllm: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("sweep") / "result.json"
    before = counters(vllm)
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--target", f"{vllm.base}/v1",
           "--model", MODEL_NAME, "--scrape-metrics", f"{vllm.base}/metrics",
           "--concurrency", "1,16", "--requests", "24", "--warmup", "0", "--no-samplers",
           "--json", str(out), "--timeout", "120", *SHORT_PROMPTS]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    after = counters(vllm)
    doc["_server_delta"] = {k: round(after[k] - before[k]) for k in COUNTERS}
    doc["_stdout"] = done.stdout
    print(done.stdout)  # the closing note's figures (pytest -s)
    for lv in doc["levels"]:
        srv = lv["server"]
        full = sum(1 for u in srv["timeline"]["kv_usage"] if u is not None and u > 0.9)
        print(f"c={lv['concurrency']}: scraped KV peak {srv['kv_usage_peak']:.2f}, mean "
              f"{srv['kv_usage_mean']:.2f} ({full}/{srv['num_scrapes']} scrapes > 0.9), "
              f"preemptions {srv['preemptions']}, peak running {srv['peak_running']}, "
              f"peak waiting {srv['peak_waiting']}")
    print("server counters over the sweep:", doc["_server_delta"])
    return doc


def test_preemptions_are_the_servers_exactly(sweep: dict) -> None:
    levels = sweep["levels"]
    scraped = sum(lv["server"]["preemptions"] for lv in levels)
    assert scraped == sweep["_server_delta"]["vllm:num_preemptions"]
    assert levels[-1]["counts"]["preemptions"] == levels[-1]["server"]["preemptions"] > 0


def test_kv_peak_at_saturation_from_real_samples(sweep: dict) -> None:
    last = sweep["levels"][-1]
    server = last["server"]
    assert server["num_scrapes"] >= 10 and server["num_failed"] == 0
    assert last["kv"]["usage_peak"] > 0.9
    assert 0 < last["kv"]["usage_mean"] <= last["kv"]["usage_peak"]
    assert server["peak_waiting"] > 0
    timeline = server["timeline"]
    assert len(timeline["t_s"]) == len(timeline["kv_usage"]) >= 10
    assert max(timeline["kv_usage"]) == server["kv_usage_peak"]


def test_no_unplanned_prefix_hits_across_levels(sweep: dict) -> None:
    for lv in sweep["levels"]:
        assert lv["counts"]["cached_tokens"] == 0, lv["point"]
        assert lv["prefix_hit_rate"] == 0
    assert not [f for f in sweep["findings"] if f["id"] == "unplanned_prefix_hits"]
