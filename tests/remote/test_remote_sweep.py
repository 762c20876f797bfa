"""`perfkit sweep --target` end to end: the same counts as the in-process sweep against
a real `perfkit serve`; a server that dies mid-sweep leaves errors and a valid result."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from levels import level as typed_level

SCHEMA = json.loads((Path(__file__).parents[2] / "perfkit/result/sweep.schema.json").read_text())
SAME = ("requests", "completed", "finish_reasons", "prompt_tokens", "output_tokens",
        "preemptions")
TINY = ["--profile", "shared-prefix", "--requests", "6", "--concurrency", "1,2",
        "--set", "engine.cpu_threads=1"]


def sweep(cli, path: Path, *args: str) -> dict:
    result = cli("sweep", *args, "--json", str(path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc


def test_target_gives_the_in_process_counts(cli, tmp_path):
    testing = pytest.importorskip("perfkit.serve.testing", reason="perfkit serve not built yet")
    local = sweep(cli, tmp_path / "local.json", *TINY)
    with testing.running_server("shared-prefix", sets=("engine.cpu_threads=1",)) as base:
        remote = sweep(cli, tmp_path / "remote.json", *TINY, "--target", f"{base}/v1",
                       "--scrape-metrics", f"{base}/metrics")
    assert remote["target"] == {"url": f"{base}/v1", "model": "shared-prefix",
                                "scrape_metrics": f"{base}/metrics"}
    assert remote["environment"]["device_class"] == "remote:shared-prefix"
    for here, there in zip(local["levels"], remote["levels"], strict=True):
        assert {k: here["counts"][k] for k in SAME} == {k: there["counts"][k] for k in SAME}
        assert there["errors"]["total"] == 0 and there["server"]["available"]
        client = there["client"]
        assert 0 < client["cpu_share"] < 1 and client["cpu_per_request_s"] > 0
        assert client["loop_lag"]["count"] > 0
    # Level 1 starts from the same pool state in both (fresh, then the warm-up) and runs
    # one request at a time: the server's prefix hits equal the engine's cached tokens.
    # (The server keeps its cache across levels; the in-process engine resets it.)
    first = remote["levels"][0]["server"]
    assert first["prefix_hits"] == local["levels"][0]["counts"]["cached_tokens"] > 0
    assert remote["levels"][0]["kv"]["usage_peak"] > 0


def test_server_dying_mid_sweep_is_recorded(cli, stub, tmp_path):
    server = stub(die_after=4)  # the 5th request is cut, then the port closes
    metrics = server.url.removesuffix("/v1") + "/metrics"
    doc = sweep(cli, tmp_path / "r.json", "--target", server.url, "--requests", "6",
                "--warmup", "1", "--concurrency", "1,2", "--scrape-metrics", metrics)
    assert doc["complete"] is True and len(doc["levels"]) == 2
    first, second = (lv["errors"] for lv in doc["levels"])
    sent = [lv["counts"]["requests"] for lv in doc["levels"]]  # the plan sizes each level
    assert first["by_kind"].get("broken stream", 0) >= 1 and first["total"] == sent[0] - 3
    assert second["total"] == sent[1] and set(second["by_kind"]) <= {"connection refused",
                                                               "broken stream"}
    assert doc["levels"][0]["counts"]["completed"] == 3
    assert doc["levels"][1]["server"]["available"] is False  # nothing to scrape any more
    errors = [r["error"] for r in doc["levels"][0]["requests"] if not r["warmup"]]
    assert errors[:3] == [None] * 3 and errors[3] == "broken stream"
    assert "http_errors" in {f["id"] for f in doc["findings"]}


def test_open_loop_level_against_a_target(cli, stub, tmp_path):
    server = stub(tokens_per_chunk=2)
    doc = sweep(cli, tmp_path / "r.json", "--target", server.url, "--model", "x",
                "--requests", "8", "--warmup", "0", "--rate", "200",
                "--set", 'workload.output_len.kind="fixed"', "--set", "workload.output_len.mean=6",
                "--set", "workload.output_len.min=6", "--set", "workload.output_len.max=6")
    level = doc["levels"][0]
    assert level["rate"] == 200 and level["counts"]["output_tokens"] == 8 * 6
    assert level["client"]["connections"] is None  # open loop: no pool limit
    assert level["kv"]["available"] is False and "no --scrape-metrics" in level["kv"]["reason"]
    assert {b["model"] for b in server.cfg.bodies} == {"x"}


def test_option_errors_exit_2_before_any_level(cli, tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    result = cli("sweep", "--target", "http://127.0.0.1:1/v1", "--json", str(path))
    assert result.exit_code == 2 and "cannot reach http://127.0.0.1:1/v1" in result.stderr
    assert not path.exists()
    result = cli("sweep", "--scrape-metrics", "http://127.0.0.1:1/metrics")
    assert result.exit_code == 2 and "--scrape-metrics needs --target" in result.stderr
    monkeypatch.delenv("PERFKIT_NO_SUCH_KEY", raising=False)
    result = cli("sweep", "--target", "http://127.0.0.1:1/v1", "--api-key-env",
                 "PERFKIT_NO_SUCH_KEY")
    assert result.exit_code == 2 and "PERFKIT_NO_SUCH_KEY is not set" in result.stderr
    result = cli("sweep", "--target", "http://127.0.0.1:1/v1", "--device", "cpu")
    assert result.exit_code == 2 and "--device" in result.stderr


def remote_level(**client):
    return {
        "concurrency": 8, "rate": None, "repeat": 0,
        "counts": {"preemptions": 0, "steps": None},
        "kv": {"usage_peak": 0.5, "peak_waiting": 3, "peak_blocks_used": None,
               "blocks_total": None, "source": "vllm:kv_cache_usage_perc (scraped)"},
        "client": {"cpu_s": 0.1, "wall_s": 1.0, "requests": 8, "connections": 8,
                   "lag_interval_s": 0.01, "cpu_share": 0.1, "loop_lag": {"p99": 0.001},
                   "cpu_per_request_s": 0.001} | client,
        "errors": {"total": 0, "by_kind": {}, "warmup": 0, "retry_after_s_max": None},
    }


def test_remote_findings_fire_on_crafted_levels():
    from perfkit.config.profile import Overrides, load_profile
    from perfkit.summary.findings import find_all

    prof = load_profile("default", Overrides())

    def ids(part):
        return {f.id for f in find_all([typed_level(part)], prof, None)}

    assert ids(remote_level()) == set()  # engine rules do not run on a remote level
    assert ids(remote_level(cpu_share=0.8)) == {"client_bound"}
    assert ids(remote_level(loop_lag={"p99": 0.05})) == {"client_bound"}
    busy = remote_level()
    busy["kv"]["usage_peak"] = 0.97  # scraped: full, with requests waiting
    assert ids(busy) == {"kv_pressure"}
    failing = remote_level()
    failing["errors"] = {"total": 2, "by_kind": {"http 503": 2}, "warmup": 0,
                         "retry_after_s_max": None}
    assert ids(failing) == {"http_errors"}


def test_a_dead_target_stops_the_sweep_with_what_was_measured(cli, stub, tmp_path,
                                                               monkeypatch):
    """A target that refuses every connection for DOWN_AFTER_S: the level sends nothing
    more, the sweep stops after it (exit 1, one line), the file keeps that level."""
    import perfkit.loadgen.client as client

    monkeypatch.setattr(client, "DOWN_AFTER_S", 0.0)  # the second refusal in a row: 400
    # refusals can all fit in 50 ms on a fast machine, so any window would race
    server = stub(die_after=4, chunk_gap_s=0.001)
    path = tmp_path / "r.json"
    result = cli("sweep", "--target", server.url, "--requests", "400", "--warmup", "0",
                 "--concurrency", "1,2", "--json", str(path), "--format", "json")
    assert result.exit_code == 1, result.stderr
    assert "Stopped: the target stopped answering at concurrency 1" in result.stderr
    assert "refused every connection" in result.stderr
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["complete"] is False and len(doc["levels"]) == 1
    assert doc["stop_reason"].startswith("the target stopped answering")
    level = doc["levels"][0]
    assert level["client"]["target_down"] is not None
    assert level["counts"]["requests"] < 400  # it stopped sending
    assert "client_bound" not in {f["id"] for f in doc["findings"]}


def test_target_with_n_times_each_choice(cli, tmp_path):
    """workload.n=2 against perfkit serve: the request asks for n, each chunk's index
    files its time under its choice, output tokens count both choices (as in-process)."""
    from perfkit.serve.testing import running_server

    args = (*TINY, "--concurrency", "2", "--set", "workload.n=2", "--set",
            "sweep.min_requests_per_client=0")
    local = sweep(cli, tmp_path / "local.json", *args)
    with running_server("shared-prefix", sets=("engine.cpu_threads=1",)) as base:
        remote = sweep(cli, tmp_path / "remote.json", *args, "--target", f"{base}/v1")
    here, there = local["levels"][0], remote["levels"][0]
    assert there["counts"]["outputs"] == here["counts"]["outputs"] == 2 * 6
    assert there["counts"]["output_tokens"] == here["counts"]["output_tokens"]
    req = next(r for r in there["requests"] if not r["warmup"])
    assert req["outputs"] == 2
    assert len(req["itl_s"]) == req["output_tokens"] - 2  # gaps within each choice
    assert there["latency"]["tpot"]["count"] == 6 and there["errors"]["total"] == 0
