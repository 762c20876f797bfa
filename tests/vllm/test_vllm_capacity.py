"""Predicted preemptions against a real vLLM (CPU build, tiny model, 40 blocks of 32,
max_num_seqs 16, its default token budget of 2048 on CPU).

64 requests of the default profile's prompts with outputs of 64-160 tokens, each run with
its own seed (fresh prompts: no prefix hits from an earlier run). Saturated (all 64 at
once): the Engine with the null executor and `fragmentation --simulate` within 10% of the
server. Closed loop at concurrency 8: the server's clients send the next request some
time after an answer (their round trip, ~40 engine steps here), which spreads the load;
with workload.client_delay_steps = 40 the prediction lands near the server's figure,
without it (0) it is twice the server's or more. Figures measured: README, "Capacity".
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_server import MODEL_NAME, VllmServer

from perfkit.config.profile import Overrides, load_profile
from perfkit.fragmentation.exact import replay_scheduler
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.trace import lengths_trace
from perfkit.remote.scrape import parse_metrics
from perfkit.remote.tiny_model import write_tiny_model
from perfkit.workload import generate

NUM_BLOCKS, BLOCK, MAX_SEQS, BUDGET, NUM = 40, 32, 16, 2048, 64  # BUDGET: vLLM's CPU default
LOAD = ("workload.output_len.min=64", "workload.output_len.max=160",
        "sweep.min_requests_per_client=0")
SEEDS = (1, 2, 3)
CLIENT_DELAY_STEPS = 40


@pytest.fixture(scope="module")
def server(vllm_exe: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    root = tmp_path_factory.mktemp("vllm40")
    model = write_tiny_model(root / "model", vocab=512, max_len=512)
    srv = VllmServer(vllm_exe, model, root / "vllm.log", num_blocks=NUM_BLOCKS)
    srv.start(600)
    try:
        yield srv
    finally:
        srv.stop()


def preemptions(srv: VllmServer) -> float:
    with urllib.request.urlopen(f"{srv.base}/metrics", timeout=10) as resp:
        values = parse_metrics(resp.read().decode(), ("vllm:num_preemptions",))
    return sum(values.get("vllm:num_preemptions", [0.0]))


def real(srv: VllmServer, clients: int, seed: int, tmp: Path) -> int:
    """The server's preemptions over one closed-loop level of NUM requests."""
    sets = [x for s in (*LOAD, f"workload.seed={seed}") for x in ("--set", s)]
    before = preemptions(srv)
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--target", f"{srv.base}/v1",
           "--model", MODEL_NAME, "--concurrency", str(clients), "--requests", str(NUM),
           "--warmup", "0", "--no-samplers", "--json", str(tmp / f"c{clients}-{seed}.json"),
           "--timeout", "300", *sets]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    level = json.loads((tmp / f"c{clients}-{seed}.json").read_text())["levels"][0]
    assert level["counts"]["completed"] == NUM
    return round(preemptions(srv) - before)


def predicted(clients: int, seed: int, delay: int) -> tuple[int, int]:
    """(Engine with the null executor, fast replay) preemptions."""
    prof = load_profile("default", Overrides(sets=(
        f"engine.block_size={BLOCK}", f"engine.num_blocks={NUM_BLOCKS}",
        f"engine.max_num_seqs={MAX_SEQS}", f"engine.max_num_batched_tokens={BUDGET}",
        f"workload.seed={seed}", f"workload.client_delay_steps={delay}", *LOAD)))
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, NUM)
    engine = replay_scheduler(prof, specs, [0] * NUM, clients=clients, client_delay=delay)
    fast = simulate_paged(lengths_trace(prof, NUM, "closed", clients=clients), NUM_BLOCKS,
                          BLOCK, MAX_SEQS, max_num_batched_tokens=BUDGET)
    return engine.result.num_preempted, fast.num_preempted


def test_saturated_preemptions_within_10_percent(server: VllmServer, tmp_path: Path) -> None:
    """Over the seeds together: one seed's run varies by up to ~12% from run to run (47 to
    54 for seed 2), so a single run may fall outside 10% of a right prediction."""
    got, engine, fast = [], [], []
    for seed in SEEDS:
        got.append(real(server, NUM, seed, tmp_path))
        e, f = predicted(NUM, seed, 0)
        engine.append(e)
        fast.append(f)
    print(f"saturated: vLLM {got}, engine {engine}, --simulate {fast}")
    assert abs(sum(engine) - sum(got)) <= 0.1 * sum(got)
    assert abs(sum(fast) - sum(got)) <= 0.1 * sum(got)


def test_closed_loop_with_the_client_delay(server: VllmServer, tmp_path: Path) -> None:
    got = [real(server, 8, seed, tmp_path) for seed in SEEDS]
    late = [predicted(8, seed, CLIENT_DELAY_STEPS)[1] for seed in SEEDS]
    at_once = [predicted(8, seed, 0)[1] for seed in SEEDS]
    print(f"c=8: vLLM {got}, delay {CLIENT_DELAY_STEPS}: {late}, delay 0: {at_once}")
    assert 0.5 * sum(got) <= sum(late) <= 1.5 * sum(got)
    assert sum(at_once) >= 1.5 * sum(got)
