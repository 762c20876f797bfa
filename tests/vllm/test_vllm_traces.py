"""--server-traces against a real vLLM (CPU build, tiny model) exporting its own request
spans: started with --otlp-traces-endpoint to perfkit's receiver over OTLP/HTTP protobuf,
and a planted cause, --max-num-seqs 1 (64 KV blocks: no KV pressure). One server for the
module (its own start: the shared one runs with --max-num-seqs 16 and no tracing).

- concurrency 8: at least 95% of the requests joined (vLLM continues perfkit's
  traceparent: by trace id); each joined request's server e2e within the client's, and
  the engine's queue + prefill + decode within the server's e2e (the rest is vLLM's API
  process: its e2e starts at the API server's arrival, the engine's clock at the engine's
  queue); the p99 TTFT finding names the server's queue.
- concurrency 1 (nothing queues) through a proxy that holds back every event 50 ms: the
  p99 TTFT and TPOT findings name the time outside the engine.
On two shared cores vLLM's API process itself lags under load (measured here: its share of
e2e, p50 9-100 ms at concurrency 8, growing with the machine's load); one sequence at a
time makes the planted queue (7 requests ahead) the p99's largest part by far.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from delay_proxy import DelayProxy
from vllm_server import MODEL_NAME, VllmServer, free_port

from perfkit.remote.tiny_model import write_tiny_model

TRACING_ENV = (("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),  # vLLM's default: grpc
               ("OTEL_BSP_SCHEDULE_DELAY", "500"))  # ms between span batches (default 5000)
WORKLOAD = ("--set", "workload.prompt_len.kind=fixed", "--set", "workload.prompt_len.mean=32",
            "--set", "workload.output_len.kind=fixed", "--set", "sweep.min_requests_per_client=0",
            "--warmup", "2", "--no-samplers", "--timeout", "120")


@pytest.fixture(scope="module")
def traced(vllm_exe: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[VllmServer, int]]:
    import os

    root = tmp_path_factory.mktemp("vllm-traces")
    port = free_port()
    server = VllmServer(vllm_exe, write_tiny_model(root / "model", vocab=512, max_len=512),
                        root / "vllm.log", num_blocks=64, max_num_seqs=1,
                        extra_args=("--otlp-traces-endpoint",
                                    f"http://127.0.0.1:{port}/v1/traces"),
                        extra_env=TRACING_ENV)
    server.start(float(os.environ.get("PERFKIT_VLLM_START_S", "600")))
    try:
        yield server, port
    finally:
        server.stop()


def sweep(base: str, port: int, out: Path, *args: str) -> dict:
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--target", f"{base}/v1", "--model",
           MODEL_NAME, "--server-traces", str(port), "--json", str(out), *WORKLOAD, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)  # the tables and findings (pytest -s)
    return json.loads(out.read_text())


def findings(doc: dict) -> dict[str, dict]:
    return {f["id"]: f for f in doc["findings"]}


@pytest.fixture(scope="module")
def queued(traced: tuple[VllmServer, int], tmp_path_factory: pytest.TempPathFactory) -> dict:
    server, port = traced
    # perfkit's loop may stall here for 0.3-1.4 s, with or without --scrape-metrics: vLLM's
    # CPU engine keeps both cores busy and perfkit's threads wait for a CPU (measured on a
    # quiet 2-core VM, three runs each: loop lag max 312-591 ms without the scraper,
    # 1.2-92 ms with it; machine_contended said "other processes kept 2.0 cores busy").
    return sweep(server.base, port, tmp_path_factory.mktemp("q") / "r.json", "--concurrency",
                 "8", "--requests", "32", "--set", "workload.output_len.mean=32")


def test_requests_joined_and_consistent(queued: dict) -> None:
    [lv] = queued["levels"]
    st = lv["server_traces"]
    assert st["joined"] >= 0.95 * st["requests"] and st["requests"] >= 32
    assert st["by_trace_id"] == st["joined"] and st["over_client_e2e"] == 0
    joined = [r for r in lv["requests"] if r["server"] is not None]
    assert len(joined) == st["joined"]
    for r in joined:
        s = r["server"]
        assert r["response_id"].startswith("cmpl-")
        assert s["e2e_s"] <= r["e2e_s"] and s["ttft_s"] <= r["ttft_s"]
        assert s["queue_s"] + s["prefill_s"] + s["decode_s"] <= s["e2e_s"]
    api = st["api_server"]
    print(f"joined {st['joined']}/{st['requests']} by trace id, waited {st['wait_s']:.2f} s; "
          f"e2e - (queue + prefill + decode): p50 {api['p50'] * 1e3:.1f} ms, max "
          f"{api['max'] * 1e3:.1f} ms")


def test_tiny_max_num_seqs_is_the_servers_queue(queued: dict) -> None:
    found = findings(queued)
    lag = queued["levels"][0]["client"]["loop_lag"]["max"]
    if "server_p99_ttft_queue" not in found and "client_bound" in found:
        # vLLM's CPU engine took both cores and perfkit's loop stalled (1.4 s once in CI):
        # requests waited in the client, not in the server's queue. perfkit says so
        # (client_bound); the planted queue cannot be judged on that run.
        pytest.skip(f"the client fell behind (its loop stalled up to {lag * 1e3:.0f} ms): "
                    "the machine's load, not the server's queue, decided the tail")
    f = found["server_p99_ttft_queue"]
    assert "p99 TTFT at concurrency 8 is mostly the server's queue" in f["message"]
    assert "--max-num-seqs" in f["fix"]


def test_a_delaying_proxy_is_outside_the_engine(traced: tuple[VllmServer, int],
                                                tmp_path: Path) -> None:
    server, port = traced
    proxy = DelayProxy(server.base, 0.05).start()
    try:
        doc = sweep(proxy.base, port, tmp_path / "r.json", "--concurrency", "1",
                    "--requests", "20", "--set", "workload.output_len.mean=8")
    finally:
        proxy.stop()
    st = doc["levels"][0]["server_traces"]
    assert st["joined"] >= 0.95 * st["requests"]
    found = findings(doc)
    assert "p99 TTFT at concurrency 1 is mostly outside the engine" in \
        found["server_p99_ttft_outside_engine"]["message"]
    assert "per output token" in found["server_p99_tpot_outside_engine"]["message"]
