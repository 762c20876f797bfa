"""Workers as Ray actors: a local Ray cluster on loopback (`ray start --head`), a sweep with
two Ray workers against a real `perfkit serve`, the same counts as one process; a killed
actor is a lost worker. Skipped where Ray is not installed (pip install 'perfkit[ray]')."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'perfkit[ray]'")
if not hasattr(ray, "init"):  # this folder, tests/ray, imported as a namespace package
    pytest.skip("Ray is not installed: pip install 'perfkit[ray]'", allow_module_level=True)

from perfkit.config.profile import Overrides, load_profile  # noqa: E402
from perfkit.remote.driver import RemoteRunner  # noqa: E402
from perfkit.remote.options import TargetOptions  # noqa: E402
from perfkit.remote.target import connect  # noqa: E402
from perfkit.result.point import LoadPoint  # noqa: E402
from perfkit.serve.testing import running_server  # noqa: E402
from perfkit.sweep.plan import plan_from_profile  # noqa: E402

RAY = str(Path(sys.executable).parent / "ray")
SAME = ("requests", "completed", "finish_reasons", "prompt_tokens", "output_tokens")
SWEEP = ("--requests", "12", "--concurrency", "1,4", "--warmup", "2",
         "--set", "engine.cpu_threads=1", "--format", "json")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    port = free_port()
    subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                    "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                   check=True, timeout=180, capture_output=True)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([RAY, "stop", "--force"], timeout=120, capture_output=True)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server("default", sets=("engine.cpu_threads=1",)) as base:
        yield f"{base}/v1"


def sweep(cli, path: Path, *args: str) -> dict:
    result = cli("sweep", *SWEEP, "--json", str(path), *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(path.read_text())


def test_two_ray_workers_give_the_single_process_counts(cli, cluster, served, tmp_path):
    one = sweep(cli, tmp_path / "one.json", "--target", served)
    two = sweep(cli, tmp_path / "ray.json", "--target", served, "--ray", cluster,
                "--workers", "2")
    for here, there in zip(one["levels"], two["levels"], strict=True):
        assert {k: here["counts"][k] for k in SAME} == {k: there["counts"][k] for k in SAME}
        assert [r["id"] for r in here["requests"]] == [r["id"] for r in there["requests"]]
    wide = two["levels"][1]["client"]
    assert wide["workers"] == 2 and wide["complete"] and wide["workers_chosen"] == "--workers 2"
    assert sorted(w["index"] for w in wide["per_worker"]) == [0, 1]
    assert all(w["requests"] > 0 for w in wide["per_worker"])
    # one machine: the workers share the coordinator's monotonic clock, no estimate
    assert all(w["clock_offset_s"] is None for w in wide["per_worker"])
    assert two["levels"][0]["client"]["workers"] == 1  # c=1: one worker is all it can use


def test_workers_per_node_and_a_killed_actor(cluster, served):
    prof = load_profile("default", Overrides(sets=("sweep.warmup=2", "workload.num_requests=12",
                                                   "sweep.min_requests_per_client=0")))
    remote = connect(TargetOptions(served, ray=cluster, workers_per_node=2), prof,
                     plan_from_profile(prof))
    assert remote.workers.fixed == 2  # one node here, two on it
    killed: list[int] = []

    def kill_one(record) -> None:
        if not killed:
            launcher = runner.pool.launcher  # type: ignore[union-attr]
            ray.kill(launcher.actors[1], no_restart=True)
            killed.append(1)

    with RemoteRunner(remote) as runner:
        first = runner.level(LoadPoint(concurrency=4), 0, kill_one)
        second = runner.level(LoadPoint(concurrency=4), 1, lambda r: None)
        assert "torch" not in runner.pool.heavy  # type: ignore[union-attr]
    assert first.client is not None and not first.client.complete
    [lost] = first.client.lost
    assert lost.index == 1
    assert second.client is not None and second.client.complete
    assert second.counts.requests == 12
