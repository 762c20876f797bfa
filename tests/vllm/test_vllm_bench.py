"""vLLM's own benchmark client (`vllm bench serve`) against `perfkit serve`, unmodified,
beside `perfkit sweep --target` against the same server at the same load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfkit.remote.tiny_model import write_tiny_model
from perfkit.serve.testing import running_server

CONCURRENCY = 4
NUM_PROMPTS = 32
INPUT_LEN, OUTPUT_LEN = 64, 24
# The same request shapes as vLLM's random dataset above: fixed lengths.
SAME_LOAD = ("--set", "workload.prompt_len.kind=fixed", "--set",
             f"workload.prompt_len.mean={INPUT_LEN}", "--set", "workload.output_len.kind=fixed",
             "--set", f"workload.output_len.mean={OUTPUT_LEN}")


@pytest.fixture(scope="module")
def perfkit_url() -> Iterator[str]:
    with running_server("default", sets=("engine.cpu_threads=1",)) as url:
        yield url.removesuffix("/v1")


def test_vllm_bench_serve_runs_against_perfkit_serve(vllm_exe: str, perfkit_url: str,
                                                     tmp_path: Path) -> None:
    tokenizer = write_tiny_model(tmp_path / "tok", vocab=512, max_len=512)  # default's vocab
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    bench = [vllm_exe, "bench", "serve", "--backend", "vllm", "--base-url", perfkit_url,
             "--model", "default", "--tokenizer", str(tokenizer), "--dataset-name", "random",
             "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
             "--num-prompts", str(NUM_PROMPTS), "--max-concurrency", str(CONCURRENCY),
             "--ignore-eos", "--temperature", "0", "--save-result", "--result-dir", str(tmp_path),
             "--result-filename", "bench.json", "--disable-tqdm"]
    done = subprocess.run(bench, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    ours = json.loads((tmp_path / "bench.json").read_text())
    assert ours["completed"] == NUM_PROMPTS and ours.get("failed", 0) == 0

    out = tmp_path / "sweep.json"
    sweep = [sys.executable, "-m", "perfkit", "sweep", "--target", f"{perfkit_url}/v1",
             "--scrape-metrics", f"{perfkit_url}/metrics", "--concurrency", str(CONCURRENCY),
             "--requests", str(NUM_PROMPTS), "--no-samplers", "--json", str(out),
             *SAME_LOAD]
    done = subprocess.run(sweep, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    level = json.loads(out.read_text())["levels"][0]
    lat, thr = level["latency"], level["throughput"]
    print(f"\nvllm bench serve -> perfkit serve, c={CONCURRENCY}: TTFT p50 "
          f"{ours['median_ttft_ms']:.1f} ms, TPOT p50 {ours['median_tpot_ms']:.2f} ms, "
          f"{ours['output_throughput']:.1f} output tokens/s")
    print(f"perfkit sweep --target -> perfkit serve, c={CONCURRENCY}: TTFT p50 "
          f"{lat['ttft']['p50'] * 1e3:.1f} ms, TPOT p50 {lat['tpot']['p50'] * 1e3:.2f} ms, "
          f"{thr['output_tokens_per_s']:.1f} output tokens/s")
    assert level["counts"]["completed"] >= NUM_PROMPTS
