"""--otlp-export in-process: every request a trace of its engine phases (queue, prefill,
decode, consecutive), every level a trace of its engine steps; a collector that is not
there is an error in the level, not a failed sweep."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from span_source import KeepAll

from perfkit.traces.context import client_span_id
from perfkit.traces.export import export_url
from perfkit.traces.receiver import Receiver

TINY = ("--concurrency", "2", "--requests", "6", "--warmup", "0",
        "--no-samplers", "--set", "sweep.min_requests_per_client=0", "--set",
        "engine.cpu_threads=1")


@pytest.fixture
def collector() -> Iterator[Receiver]:
    r = Receiver("127.0.0.1", 0, KeepAll()).start()
    yield r
    r.stop()


def sweep(cli, tmp_path: Path, url: str) -> dict:
    path = tmp_path / "r.json"
    res = cli("sweep", *TINY, "--otlp-export", url, "--json", str(path), "--format", "json")
    assert res.exit_code == 0, res.output
    return json.loads(path.read_text())


def test_in_process_requests_and_steps(cli, tmp_path, collector) -> None:
    doc = sweep(cli, tmp_path, f"http://{collector.address}")
    [lv] = doc["levels"]
    spans = collector.store.spans
    assert lv["otlp_export"] == {"url": f"http://{collector.address}/v1/traces",
                                 "spans": len(spans), "error": None}
    steps = [s for s in spans if s.name == "perfkit.engine.step"]
    [level] = [s for s in spans if s.name == "perfkit.level"]
    assert len(steps) == lv["counts"]["steps"] > 0
    assert all(s.parent_span_id == level.span_id and s.trace_id == level.trace_id
               for s in steps)
    assert level.start_unix_ns <= min(s.start_unix_ns for s in steps)
    roots = [s for s in spans if s.name == "perfkit.request"]
    assert len(roots) == len(lv["requests"])
    for root in roots:
        kids = sorted((s for s in spans if s.parent_span_id == root.span_id
                       and s.trace_id == root.trace_id), key=lambda s: s.start_unix_ns)
        assert [k.name for k in kids] == ["perfkit.queue", "perfkit.prefill", "perfkit.decode"]
        assert root.span_id == client_span_id(root.trace_id)
        assert kids[0].start_unix_ns == root.start_unix_ns
        assert all(a.end_unix_ns == b.start_unix_ns for a, b in pairwise(kids))
        assert abs(kids[-1].end_unix_ns - root.end_unix_ns) <= 2
        # the engine's steps ran while the request was in it
        assert level.start_unix_ns - 5e6 <= root.start_unix_ns <= level.end_unix_ns


def test_no_collector_is_an_error_in_the_level(cli, tmp_path) -> None:
    doc = sweep(cli, tmp_path, "http://127.0.0.1:9")
    export = doc["levels"][0]["otlp_export"]
    assert export["spans"] == 0 and export["error"]


@pytest.mark.parametrize(("url", "want"), [
    ("http://c:4318", "http://c:4318/v1/traces"), ("http://c:4318/", "http://c:4318/v1/traces"),
    ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
    ("http://c/api/traces", "http://c/api/traces")])
def test_export_url(url: str, want: str) -> None:
    assert export_url(url) == want
