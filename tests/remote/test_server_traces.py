"""--server-traces end to end against the stub, which posts one OTLP span per request as
vLLM does: every request joined (by trace id, or by request id when the server starts a
trace of its own), server e2e within the client's, planted causes named (a queue in the
server; a proxy that holds back every event: outside the engine), and without tracing the
result and the table say why server timings are unavailable. --otlp-export's client spans
are the parents of the server's spans."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from delay_proxy import DelayProxy
from span_source import KeepAll

from perfkit.traces.context import client_span_id
from perfkit.traces.receiver import Receiver

SCHEMA = json.loads((Path(__file__).parents[2] / "perfkit/result/sweep.schema.json").read_text())
SMALL = ("--concurrency", "4", "--requests", "24", "--warmup", "2", "--no-samplers",
         "--set", "sweep.min_requests_per_client=0", "--set", "workload.output_len.kind=fixed",
         "--set", "workload.output_len.mean=8")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cli, tmp_path: Path, url: str, *args: str) -> tuple[dict, str]:
    path = tmp_path / "r.json"
    res = cli("sweep", "--target", url, *SMALL, *args, "--json", str(path), "--force",
              width=120)
    assert res.exit_code == 0, res.output
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc, res.stdout


def traced(stub, **kw):
    port = free_port()
    return stub(otlp_url=f"http://127.0.0.1:{port}/v1/traces", chunk_gap_s=0.001, **kw), port


def finding(doc: dict, fid: str) -> dict:
    found = {f["id"]: f for f in doc["findings"]}
    assert fid in found, list(found)
    return found[fid]


def test_every_request_joined_and_the_queue_named(cli, stub, tmp_path) -> None:
    server, port = traced(stub, queue_s=0.5)  # far above the client's own lag on a busy machine
    doc, out = run(cli, tmp_path, server.url, "--server-traces", str(port))
    [lv] = doc["levels"]
    st = lv["server_traces"]
    assert st["available"] and st["joined"] == st["requests"] == 24 == st["by_trace_id"]
    assert st["over_client_e2e"] == 0 and st["reason"] == ""
    measured = [r for r in lv["requests"] if not r["warmup"]]
    assert len({r["trace_id"] for r in lv["requests"]}) == len(lv["requests"])
    for r in measured:
        s = r["server"]
        assert r["response_id"].startswith("cmpl-") and s["joined_by"] == "trace id"
        assert s["e2e_s"] <= r["e2e_s"] and s["ttft_s"] <= r["ttft_s"]
        assert s["queue_s"] + s["prefill_s"] + s["decode_s"] <= s["e2e_s"]
        assert s["queue_s"] >= 0.5
    f = finding(doc, "server_p99_ttft_queue")
    assert "p99 TTFT at concurrency 4 is mostly the server's queue: " in f["message"]
    assert "server view" in out and "24/24" in out


def test_request_id_join_without_context_propagation(cli, stub, tmp_path) -> None:
    server, port = traced(stub, propagate=False)
    doc, _ = run(cli, tmp_path, server.url, "--server-traces", f"127.0.0.1:{port}")
    st = doc["levels"][0]["server_traces"]
    assert st["joined"] == st["by_request_id"] == st["requests"] == 24


def test_a_delaying_proxy_is_outside_the_engine(cli, stub, tmp_path) -> None:
    server, port = traced(stub)
    proxy = DelayProxy(server.url.removesuffix("/v1"), 0.02).start()
    try:
        doc, _ = run(cli, tmp_path, f"{proxy.base}/v1", "--server-traces", str(port))
    finally:
        proxy.stop()
    assert doc["levels"][0]["server_traces"]["joined"] == 24
    assert "outside the engine" in finding(doc, "server_p99_ttft_outside_engine")["message"]
    tpot = finding(doc, "server_p99_tpot_outside_engine")
    assert "per output token" in tpot["message"] and "proxy" in tpot["fix"]


def test_without_tracing_server_timings_are_unavailable(cli, stub, tmp_path) -> None:
    doc, out = run(cli, tmp_path, stub().url)
    st = doc["levels"][0]["server_traces"]
    assert not st["available"] and "no --server-traces" in st["reason"]
    assert all(r["server"] is None and r["trace_id"] for r in doc["levels"][0]["requests"])
    assert "server timings unavailable: no --server-traces" in " ".join(out.split())
    assert not [f for f in doc["findings"] if f["id"].startswith("server_")]


def test_a_server_that_sends_no_span_is_a_warning(cli, stub, tmp_path) -> None:
    doc, _ = run(cli, tmp_path, stub().url, "--server-traces", str(free_port()),
                 "--server-traces-wait", "0.2")
    st = doc["levels"][0]["server_traces"]
    assert not st["available"] and st["requests"] == 24 and 0.2 <= st["wait_s"] < 2
    assert "no request span arrived" in finding(doc, "server_traces_unjoined")["message"]


@pytest.fixture
def collector() -> Iterator[Receiver]:
    r = Receiver("127.0.0.1", 0, KeepAll()).start()
    yield r
    r.stop()


def test_exported_client_spans_parent_the_servers(cli, stub, tmp_path, collector) -> None:
    server, port = traced(stub)
    doc, _ = run(cli, tmp_path, server.url, "--server-traces", str(port),
                 "--otlp-export", f"http://{collector.address}")
    lv = doc["levels"][0]
    assert lv["otlp_export"]["error"] is None
    spans = collector.store.spans
    assert lv["otlp_export"]["spans"] == len(spans) == 3 * len(lv["requests"])
    roots = {s.trace_id: s for s in spans if s.name == "perfkit.request"}
    for r in lv["requests"]:
        root = roots[r["trace_id"]]
        assert root.span_id == client_span_id(r["trace_id"]) and root.service == "perfkit"
        assert root.end_unix_ns - root.start_unix_ns == pytest.approx(r["e2e_s"] * 1e9, abs=2)
    children = [s for s in spans if s.name != "perfkit.request"]
    assert {s.name for s in children} == {"perfkit.first_token", "perfkit.stream"}
    assert all(s.parent_span_id == client_span_id(s.trace_id) for s in children)


def test_records_from_worker_processes_join_the_same(cli, stub, tmp_path) -> None:
    server, port = traced(stub)
    doc, _ = run(cli, tmp_path, server.url, "--server-traces", str(port), "--workers", "2")
    st = doc["levels"][0]["server_traces"]
    assert st["joined"] == st["by_trace_id"] == st["requests"] == 24
