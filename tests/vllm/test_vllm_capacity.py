"""Predicted preemptions against a real vLLM (CPU build, tiny model, 40 blocks of 32,
max_num_seqs 16, its default token budget of 2048 on CPU).

64 requests of the default profile's prompts with outputs of 64-160 tokens, each run with
its own seed (fresh prompts: no prefix hits from an earlier run). Saturated (all 64 at
once): the Engine with the null executor and `fragmentation --simulate` within 10% of the
server. Closed loop at concurrency 8: the server's clients send the next request some
time after an answer (their round trip), which spreads the load. That delay in engine
steps depends on the machine (a loaded CI runner steps the server slower: fewer steps per
round trip), so it is measured from the run itself: the time a request's client spent
outside the server's own request window (its e2e less the server's e2e_request_latency,
plus the wait from an answer to its next send), over the server's step time (the level's
window over the server's iteration_tokens_total count).
The server holds one of its 40 blocks back (vLLM's null block), as perfkit's pool does
by default (engine.null_block): both replays are given the 39 a request can use. Without
that block the closed loop predicted 30-32 against the server's 35-39.
The delay is not always steady: on this 2-core machine one run's mean was 2 steps, the
next one's 42-460 (the API server starved of CPU, by other load or beside the server's
own engine on an idle machine, hands the answers back in bursts), and a mean spreads the
load more evenly than such bursts do. So the prediction is a range: at the measured mean
round trip (the load spread out the most) and with none (the clients' requests as soon as
the engine frees them). Runs with a steady round trip are judged: the server's preemptions
within that range, widened by CLOSED_RANGE; bursty runs are printed (they landed in the
range too, except under heavy other load). Figures measured: docs/validation/capacity-vllm.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from vllm_server import MODEL_NAME, VllmServer

from perfkit.config.profile import Overrides, load_profile, usable_blocks
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
SATURATION_TRIES = 3
SATURATED_QUEUE_SHARE = 0.25
STEADY_STEPS = 10  # steady round trips measured ~2 steps; bursty ones a mean of 26-740
CLOSED_RANGE = 0.15  # one seed's server runs differ by up to ~13% (see the saturated test)


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


PREEMPTED, STEPS = "vllm:num_preemptions", "vllm:iteration_tokens_total_count"
E2E_SUM = "vllm:e2e_request_latency_seconds_sum"
QUEUE_SUM = "vllm:request_queue_time_seconds_sum"  # in the engine's waiting queue
NAMES = (PREEMPTED, STEPS, E2E_SUM, QUEUE_SUM)


@dataclass(frozen=True)
class Run:
    preemptions: int
    delay_steps: int  # the clients' round trip in the server's engine steps
    queued_share: float  # of the server's request time, the share spent waiting


def counters(srv: VllmServer) -> dict[str, float]:
    with urllib.request.urlopen(f"{srv.base}/metrics", timeout=10) as resp:
        values = parse_metrics(resp.read().decode(), NAMES)
    return {name: sum(values.get(name, [0.0])) for name in NAMES}


def real(srv: VllmServer, clients: int, seed: int, tmp: Path, attempt: int = 0) -> Run:
    """The server's preemptions over one closed-loop level of NUM requests, and the
    clients' delay in engine steps (see the module's docstring)."""
    sets = [x for s in (*LOAD, f"workload.seed={seed}") for x in ("--set", s)]
    out = tmp / f"c{clients}-{seed}-{attempt}.json"
    before = counters(srv)
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--target", f"{srv.base}/v1",
           "--model", MODEL_NAME, "--concurrency", str(clients), "--requests", str(NUM),
           "--warmup", "0", "--no-samplers", "--json", str(out), "--timeout", "300", *sets]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    level = json.loads(out.read_text())["levels"][0]
    assert level["counts"]["completed"] == NUM
    after = counters(srv)
    delta = {name: after[name] - before[name] for name in after}
    step_s = level["throughput"]["window_s"] / max(delta[STEPS], 1.0)
    return Run(round(delta[PREEMPTED]), round(outside_s(level, clients, delta) / step_s),
               delta[QUEUE_SUM] / max(delta[E2E_SUM], 1e-9))


def outside_s(level: dict[str, Any], clients: int, delta: dict[str, float]) -> float:
    """Mean seconds a request's client spent outside the server's window: its own e2e less
    the server's, plus the wait from an answer to the client's next send (the i-th send
    after the first `clients` follows the i-th answer)."""
    reqs = level["requests"]
    arrivals = sorted(r["arrival_s"] for r in reqs)
    answers = sorted(r["arrival_s"] + r["e2e_s"] for r in reqs)
    gaps = [a - b for a, b in zip(arrivals[clients:], answers)]
    front = (sum(r["e2e_s"] for r in reqs) - delta[E2E_SUM]) / len(reqs)
    return max(front + sum(gaps) / max(len(gaps), 1), 0.0)


def predicted(clients: int, seed: int, delay: int) -> tuple[int, int]:
    """(Engine with the null executor, fast replay) preemptions."""
    prof = load_profile("default", Overrides(sets=(
        f"engine.block_size={BLOCK}", f"engine.num_blocks={NUM_BLOCKS}",
        f"engine.max_num_seqs={MAX_SEQS}", f"engine.max_num_batched_tokens={BUDGET}",
        f"workload.seed={seed}", f"workload.client_delay_steps={delay}", *LOAD)))
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, NUM)
    engine = replay_scheduler(prof, specs, [0] * NUM, clients=clients, client_delay=delay)
    fast = simulate_paged(lengths_trace(prof, NUM, "closed", clients=clients),
                          usable_blocks(prof), BLOCK, MAX_SEQS, max_num_batched_tokens=BUDGET)
    return engine.result.num_preempted, fast.num_preempted


def saturated(srv: VllmServer, seed: int, tmp: Path) -> Run | None:
    """A run in which the server really had the requests at once: they spent at least
    SATURATED_QUEUE_SHARE of their server time waiting (64 requests for 16 slots: ~0.6).
    On a loaded machine its API server may hand them to the engine so slowly that they
    never queue (seen: 0 preemptions, the engine finishing requests as they trickled in);
    such a run is retried, at most SATURATION_TRIES times."""
    for attempt in range(SATURATION_TRIES):
        run = real(srv, NUM, seed, tmp, attempt)
        print(f"seed {seed}: {run.preemptions} preemptions, queued {run.queued_share:.2f}")
        if run.queued_share >= SATURATED_QUEUE_SHARE:
            return run
    return None


def test_saturated_preemptions_within_10_percent(server: VllmServer, tmp_path: Path) -> None:
    """Over the seeds together: one seed's run varies by up to ~12% from run to run (47 to
    54 for seed 2), so a single run may fall outside 10% of a right prediction. Seeds whose
    server never saturated are left out; at least two must remain."""
    got, engine, fast = [], [], []
    for seed in SEEDS:
        run = saturated(server, seed, tmp_path)
        if run is None:
            continue
        got.append(run.preemptions)
        e, f = predicted(NUM, seed, 0)
        engine.append(e)
        fast.append(f)
    print(f"saturated: vLLM {got}, engine {engine}, --simulate {fast}")
    assert len(got) >= 2, "the server saturated for fewer than two seeds: machine too loaded"
    assert abs(sum(engine) - sum(got)) <= 0.1 * sum(got)
    assert abs(sum(fast) - sum(got)) <= 0.1 * sum(got)


def test_closed_loop_with_the_client_delay(server: VllmServer, tmp_path: Path) -> None:
    """Runs whose clients' round trip was steady (a mean of at most STEADY_STEPS engine
    steps) land, together, between the prediction at their measured delay and the one
    with no delay, widened by CLOSED_RANGE; a bursty run's mean round trip says little of
    how its load arrived, so it is printed, not judged, and with no steady run there is
    nothing to judge."""
    runs = [real(server, 8, seed, tmp_path) for seed in SEEDS]
    got = [r.preemptions for r in runs]
    late = [predicted(8, seed, r.delay_steps)[1] for seed, r in zip(SEEDS, runs)]
    at_once = [predicted(8, seed, 0)[1] for seed in SEEDS]
    delays = [r.delay_steps for r in runs]
    print(f"c=8: vLLM {got}, measured delay {delays} steps: {late}, delay 0: {at_once}")
    assert all(d >= 0 for d in delays)
    assert sum(at_once) >= 0.75 * sum(got)  # no round trip: the most pressure, near the server
    assert sum(at_once) >= sum(late)  # a round trip spreads the load: never more pressure
    steady = [k for k, d in enumerate(delays) if d <= STEADY_STEPS]
    if not steady:
        pytest.skip(f"no run's round trip was steady (measured {delays} steps, at most "
                    f"{STEADY_STEPS} needed): the machine's load decided the arrivals")
    server_sum = sum(got[k] for k in steady)
    low, high = sum(late[k] for k in steady), sum(at_once[k] for k in steady)
    assert (1 - CLOSED_RANGE) * low <= server_sum <= (1 + CLOSED_RANGE) * high, (
        f"steady runs {steady}: server {server_sum}, predicted {low} (measured delay) to "
        f"{high} (none)")
