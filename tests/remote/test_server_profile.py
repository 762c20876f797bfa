"""Against a target: --server-profile around a level's measured phase (a stub with vLLM's
routes, and perfkit serve, which has none: a clear 404 message, the sweep completes), and
the client's view of the tail: first-token time and stalls between chunks."""

from __future__ import annotations

import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.errors import PerfkitError
from perfkit.remote.profile import profile_keys, profile_root
from perfkit.result.client_tail import STALL_FACTOR
from perfkit.result.level import LoadPoint
from perfkit.run import TargetOptions, run_sweep
from perfkit.summary.client_tail import stalls_of

SETS = ("sweep.concurrency=[1, 2]", "sweep.rates=[]", "workload.num_requests=6",
        "sweep.warmup=1", "engine.cpu_threads=1")


def _profile(*extra: str):
    return load_profile("default", Overrides(sets=(*SETS, *extra)))


def test_profile_keys_and_root():
    levels = [LoadPoint(1, None), LoadPoint(8, None), LoadPoint(None, 4.0)]
    assert profile_keys("c=8, rate-4", levels) == {"8", "rate-4"}
    assert profile_keys("all", levels) == {"1", "8", "rate-4"}
    assert profile_keys(None, levels) == frozenset()
    with pytest.raises(PerfkitError, match=r"no level '16'.*choose from 1, 8, rate-4 or all"):
        profile_keys("16", levels)
    assert profile_root("http://h:8000/v1") == profile_root("http://h:8000/v1/") == "http://h:8000"


def test_stalls_are_gaps_over_four_times_the_median_with_their_token_index():
    times = [0.0, 0.01, 0.02, 0.03, 0.13, 0.14, 0.15]  # 100 ms before chunk 4
    mid, stalls = stalls_of(times)
    assert mid == pytest.approx(0.01) and STALL_FACTOR == 4.0
    assert [(s.index, round(s.gap_s, 3)) for s in stalls] == [(4, 0.1)]
    assert stalls_of([0.0, 0.1, 0.2]) == (None, [])  # two gaps: no median to compare with


def test_stub_profiles_the_chosen_level_only_and_lists_its_trace(stub, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    server = stub(profile_dir=traces)
    result = run_sweep(_profile(), target=TargetOptions(
        server.url, server_profile="2", server_profile_dir=traces))
    first, second = result.levels
    assert first.server_profile is None
    prof = second.server_profile
    assert server.cfg.profile_calls == ["start perfkit-level-2", "stop"]
    assert prof is not None and prof.written and prof.trace_dir == str(traces)
    assert prof.trace_files == [str(traces / "perfkit-level-2_rank0.pt.trace.json")]
    assert prof.message == f"the server wrote 1 trace file(s), 2 B, to {traces}"


def test_perfkit_serve_has_no_profiler_a_clear_404_and_the_sweep_completes(cli, tmp_path):
    testing = pytest.importorskip("perfkit.serve.testing")
    with testing.running_server("default", sets=("engine.cpu_threads=1",)) as base:
        res = cli("sweep", "--target", f"{base}/v1", "--concurrency", "1,2", "--requests",
                  "6", "--warmup", "1", "--server-profile", "c=1", "--json",
                  str(tmp_path / "r.json"), "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert "Traceback" not in res.stderr
    line = next(ln for ln in res.stderr.splitlines() if "server profile" in ln)
    assert "start_profile answered 404" in line and "--profiler-config.profiler=torch" in line
    from perfkit.result.io import load_result

    levels = load_result(tmp_path / "r.json").levels
    assert len(levels) == 2 and levels[0].server_profile is not None
    assert not levels[0].server_profile.written and levels[1].server_profile is None


def test_client_view_of_the_tail_names_the_stalls_of_the_p99_tpot_requests(stub):
    server = stub(chunk_gap_s=0.003, stall_every=10, stall_at=5, stall_gap_s=0.06)
    result = run_sweep(_profile("sweep.concurrency=[2]", "workload.num_requests=40",
                                "sweep.warmup=0"), target=TargetOptions(server.url))
    (level,) = result.levels
    sec = level.client_tail
    assert sec is not None and sec.itl_unit == "token"
    tail, median = sec.group("tpot", "tail"), sec.group("tpot", "median")
    assert tail is not None and median is not None
    # a loaded machine may add a stray gap to a median request: far fewer, far shorter
    assert tail.num_stalls >= 1 and median.num_stalls < 0.5
    assert median.stall_s < tail.stall_s / 5
    assert 5 in {s.index for r in tail.requests for s in r.stalls}
    assert tail.stall_s >= 0.05 and tail.requests[0].median_gap_s < 0.015
    ttft = sec.group("ttft", "tail")
    assert ttft is not None and ttft.num_requests >= 1
    from rich.console import Console

    from perfkit.report.tables import rich_summary

    console = Console(width=100, record=True)
    console.print(rich_summary(result))
    text = console.export_text()
    assert "Remote tail, client view" in text and "  5" in text
