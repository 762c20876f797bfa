"""`perfkit sweep --workers/--ray/--workers-per-node` and `perfkit bench --only loadgen`:
bad input exits 2 with one line; the bench reports every cell against the known timing."""

from __future__ import annotations

import importlib.util
import json

import pytest

BAD = [
    (("--workers", "0"), "--workers: expected a whole number >= 1 or auto, got '0'"),
    (("--workers", "many"), "--workers: expected a whole number >= 1 or auto"),
    (("--workers-per-node", "2"), "--workers-per-node needs --ray"),
    (("--workers-per-node", "0", "--ray", "local"), "--workers-per-node: expected a whole"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_worker_options_exit_2_with_one_line(cli, known_server, args, message):
    server = known_server()
    result = cli("sweep", "--target", server.url, "--concurrency", "2", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_worker_options_need_a_target(cli):
    for args in (("--workers", "2"), ("--ray", "local"), ("--workers-per-node", "1")):
        result = cli("sweep", *args)
        assert result.exit_code == 2 and "needs --target URL" in result.stderr


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed")
def test_ray_without_ray_names_the_extra(cli, known_server):
    result = cli("sweep", "--target", known_server().url, "--ray", "local")
    assert result.exit_code == 2
    assert "--ray needs Ray installed: pip install 'perfkit[ray]'" in result.stderr


def test_bench_loadgen_reports_each_cell(cli, tmp_path):
    out = tmp_path / "bench.json"
    result = cli("bench", "--only", "loadgen", "--concurrency", "4", "--workers", "1,2",
                 "--ttft", "0.005", "--gap", "0.002", "--tokens", "6", "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())["loadgen"]
    assert data["timing"] == {"ttft_s": 0.005, "gap_s": 0.002, "tokens": 6}
    cells = data["cells"]
    assert [(c["concurrency"], c["workers"], c["workers_used"]) for c in cells] == [
        (4, "1", 1), (4, "2", 2)]
    for c in cells:
        assert c["chunks"] == 4 * 4 * 6  # 4 requests a client, 6 chunks each
        assert c["ttft_p50_s"] >= 0.005 and c["delivered"] is not None
        assert c["within"] == (not c["misses"])
    assert "Load generator against a server of known timing" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("--concurrency", "0"), "--concurrency: expected finite positive values"),
    (("--workers", "-1"), "--workers: expected a whole number >= 1 or auto"),
    (("--tokens", "1"), "--tokens: at least 2"),
    (("--per-client", "0"), "--per-client: expected a whole number >= 1"),
])
def test_bench_loadgen_bad_input(cli, args, message):
    result = cli("bench", "--only", "loadgen", *args)
    assert result.exit_code == 2 and message in result.stderr
