"""`perfkit predict` and `perfkit calibrate`: tables, JSON, one-line errors, and a live
calibrate -> sweep -> predict round trip on CPU."""

from __future__ import annotations

import json

import pytest
from predict_fixtures import write

from perfkit.config.profile import Overrides, load_profile

FIXED = ["--set", 'workload.prompt_len.kind="fixed"', "--set", "workload.prompt_len.mean=32",
         "--set", 'workload.output_len.kind="fixed"', "--set", "workload.output_len.mean=4",
         "--set", "workload.output_len.min=4", "--set", "sweep.min_requests_per_client=0",
         "--concurrency", "1", "--requests", "3", "--warmup", "0"]
PREFILL_32 = 1e-3 + 32e-5 + 32e-9  # EXACT's first step of a 32-token prompt


@pytest.fixture
def cal(tmp_path):
    return write(tmp_path / "cal.json")


def test_table_keeps_timings_and_counts_apart(cli, cal):
    result = cli("predict", "-c", str(cal), *FIXED, width=100)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "perfkit predict: default on cpu:test" in out
    assert out.index("Predicted timings") < out.index("Counts (deterministic)")
    assert " c=1 " in out and "1.3" in out  # TTFT p50 1.32 ms


def test_json_holds_every_level(cli, cal, tmp_path):
    out = tmp_path / "pred.json"
    result = cli("predict", "-c", str(cal), *FIXED, "--format", "json", "--json", str(out))
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["schema"] == "perfkit.prediction/1" and doc["comparison"] is None
    (level,) = doc["levels"]
    assert level["concurrency"] == 1 and level["counts"]["steps"] == 12
    assert level["latency"]["ttft"]["p50"] == pytest.approx(PREFILL_32, rel=1e-9)
    again = cli("predict", "-c", str(cal), *FIXED, "--json", str(out))
    assert again.exit_code == 2 and "pass --force" in again.stderr


def test_a_cost_setting_that_differs_warns(cli, cal):
    result = cli("predict", "-c", str(cal), *FIXED, "--set", "engine.cpu_threads=2")
    assert result.exit_code == 0
    assert "engine.cpu_threads was 1 when calibrated, 2 now" in " ".join(result.stderr.split())


@pytest.mark.parametrize(("content", "args", "message"), [
    (None, [], "no such file"),
    ("{oops", [], "not a readable JSON"),
    ('{"schema": "perfkit.calibration/9"}', [], "recalibrate with this perfkit"),
    ('{"schema": "perfkit.calibration/1", "step": {}}', [], "malformed calibration"),
    ("", ["--model", "small"], "calibrated on another model shape"),
    ("", ["--format", "csv"], "--format: expected table or json"),
    ("", ["--compare", "nope.json"], "nope.json: no such file"),
])
def test_bad_input_is_one_clear_line(cli, tmp_path, content, args, message):
    path = tmp_path / "cal.json"
    if content == "":
        write(path)
    elif content is not None:
        path.write_text(content)
    result = cli("predict", "-c", str(path), *FIXED, *args, width=300)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_calibrate_refuses_to_overwrite(cli, cal):
    result = cli("calibrate", "-o", str(cal), width=300)
    assert result.exit_code == 2 and "pass --force" in result.stderr


def test_live_round_trip(cli, tmp_path):
    """Calibrate on a short live run, sweep the same levels live, predict them: the steps
    are the engine's own (equal), the p50s within a factor of four (a loose bound: the
    two live runs see the machine at different moments; a busy CI machine put one TTFT
    p50 at 0.29 of the other)."""
    cal, live = tmp_path / "cal.json", tmp_path / "live.json"
    levels = ["--concurrency", "1,4", "--requests", "16", "--warmup", "2",
              "--set", "sweep.min_requests_per_client=0"]
    done = cli("calibrate", "-o", str(cal), *levels)
    assert done.exit_code == 0, done.stderr
    doc = json.loads(cal.read_text())
    assert doc["model"]["num_layers"] == load_profile("default", Overrides()).model.num_layers
    assert doc["fit"]["num_steps"] > 200 and doc["source"]["levels"] == ["c=1", "c=4"]
    swept = cli("sweep", *levels, "--no-samplers", "--json", str(live), "--format", "json")
    assert swept.exit_code == 0, swept.stderr
    pred = cli("predict", "-c", str(cal), *levels, "--compare", str(live), "--format", "json")
    assert pred.exit_code == 0, pred.stderr
    out = json.loads(pred.stdout)
    assert out["comparison"]["same_profile"]
    live_steps = [lv["counts"]["steps"] for lv in json.loads(live.read_text())["levels"]]
    assert [lv["counts"]["steps"] for lv in out["levels"]] == live_steps
    for level in out["comparison"]["levels"]:
        for metric in ("ttft_p50", "tpot_p50"):
            assert 1 / 4 < level[metric]["predicted"] / level[metric]["live"] < 4, level
