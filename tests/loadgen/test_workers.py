"""Worker processes against the known-timing server: the same requests whatever N, one
schedule for an open loop, a lost worker, what a worker imports."""

from __future__ import annotations

import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.remote.driver import RemoteRunner
from perfkit.remote.options import TargetOptions
from perfkit.remote.target import connect
from perfkit.result.point import LoadPoint
from perfkit.run import run_sweep
from perfkit.sweep.plan import plan_from_profile

SETS = ("sweep.concurrency=[4]", "workload.num_requests=16", "sweep.warmup=4",
        "sweep.min_requests_per_client=0",
        "workload.output_len={kind='fixed', mean=8, min=8, max=8}")
OPEN = ("sweep.concurrency=[]", "sweep.rates=[40.0]",
        "workload.output_len={kind='fixed', mean=2, min=2, max=2}")


def profile(*extra: str):
    return load_profile("default", Overrides(sets=SETS + extra))


def sweep(url: str, workers: str | None, *extra: str):
    return run_sweep(profile(*extra), target=TargetOptions(url, workers=workers))


def test_two_workers_send_the_same_requests_as_one(known_server):
    server = known_server()
    one, two = sweep(server.url, None), sweep(server.url, "2")
    c1, c2 = one.levels[0].counts, two.levels[0].counts
    assert (c2.requests, c2.prompt_tokens, c2.output_tokens) == (
        c1.requests, c1.prompt_tokens, c1.output_tokens) == (16, c1.prompt_tokens, 128)
    assert [r.id for r in two.levels[0].requests] == [r.id for r in one.levels[0].requests]
    client = two.levels[0].client
    assert client is not None and client.workers == 2 and client.complete
    assert [w.requests for w in client.per_worker] == [8, 8]
    assert [w.clients for w in client.per_worker] == [2, 2]
    assert all(w.pid != one.levels[0].client.per_worker[0].pid for w in client.per_worker)
    assert client.chunks == 128 and client.cpu_per_chunk_s is not None
    assert client.achieved_concurrency is not None and client.load_error is not None
    assert client.workers_chosen == "--workers 2"
    ttft = two.levels[0].latency.ttft
    assert ttft.p50 is not None and ttft.p50 >= 0.005  # the server's own 5 ms at least


def test_open_loop_workers_send_the_levels_one_schedule(known_server):
    """Three workers start each phase at one origin: the measured arrivals, pooled, are the
    level's schedule exactly (offsets from the first), and every request went out at or
    after it was due."""
    server = known_server(gap_s=0.001, tokens=2)
    result = sweep(server.url, "3", *OPEN)
    level = result.levels[0]
    from perfkit.sweep.runner import level_specs

    prof = profile(*OPEN)
    plan = plan_from_profile(prof)
    specs = level_specs(prof, plan, LoadPoint(rate=40.0))[plan.num_warmup:]
    measured = sorted(r.arrival_s for r in level.requests if not r.warmup)
    assert [t - measured[0] for t in measured] == pytest.approx(
        [s.arrival_s - specs[0].arrival_s for s in specs], abs=1e-9)
    client = level.client
    assert client is not None and client.workers == 3
    assert client.send_late["min"] >= 0 and client.scheduled_rate is not None


def test_a_lost_worker_leaves_an_incomplete_level_and_the_sweep_goes_on(known_server):
    server = known_server(gap_s=0.02, tokens=10)
    prof = profile()
    remote = connect(TargetOptions(server.url, workers="2"), prof, plan_from_profile(prof))
    killed = []

    def kill_one(record) -> None:
        if not killed:
            proc = runner.pool.launcher.procs[1]  # type: ignore[union-attr]
            proc.kill()
            killed.append(proc.pid)

    with RemoteRunner(remote) as runner:
        first = runner.level(LoadPoint(concurrency=4), 0, kill_one)
        second = runner.level(LoadPoint(concurrency=4), 1, lambda r: None)
        assert "torch" not in runner.pool.heavy  # type: ignore[union-attr]
    client = first.client
    assert client is not None and not client.complete and client.workers == 2
    [lost] = client.lost
    assert lost.index == 1 and lost.pid == killed[0] and "exited" in lost.reason
    assert first.counts.requests < 16  # what worker 0 sent, and what 1 reported in time
    assert second.client is not None and second.client.complete
    assert second.counts.requests == 16  # worker 1 was started again before the level
    from perfkit.summary.client_rules import worker_lost

    [finding] = worker_lost([first, second], prof)
    assert "worker 1" in finding.message and "incomplete" in finding.message


def test_workers_on_another_clock_are_probed_and_converted(known_server, monkeypatch):
    """As on another host: the coordinator estimates each worker's clock offset from round
    trips, sends phase origins in its own clock, and the worker converts them (here the
    clocks are one, so the estimate must come out within its own bound of 0)."""
    import perfkit.loadgen.pool as pool_module

    monkeypatch.setattr(pool_module, "boot_id", lambda: "another-kernel")
    server = known_server()
    result = sweep(server.url, "2")
    client = result.levels[0].client
    assert client is not None and client.complete and result.levels[0].counts.requests == 16
    for w in client.per_worker:
        assert w.clock_offset_s is not None and w.clock_error_s is not None
        assert abs(w.clock_offset_s) <= w.clock_error_s + 1e-6
        assert w.clock_error_s < 0.05
