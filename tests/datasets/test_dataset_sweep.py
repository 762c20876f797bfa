"""Datasets and traces drive a real sweep; a multi-turn dataset shows prefix hits growing
with the turn number; a broken record stops the sweep before any level with exit 2."""

from __future__ import annotations

import json

import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.sweep.plan import plan_from_profile
from perfkit.sweep.runner import level_specs

# Level sizing off: the levels take exactly --requests records.
BASE = ["--concurrency", "2", "--requests", "8", "--warmup", "2",
        "--set", "engine.cpu_threads=1", "--set", "sweep.min_requests_per_client=0",
        "--set", "sweep.min_level_s=0"]


def sweep(cli, tmp_path, *sets: str) -> dict:
    out = tmp_path / "r.json"
    args = [a for s in sets for a in ("--set", s)]
    result = cli("sweep", *BASE, *args, "--json", str(out), "--format", "json", "--force")
    assert result.exit_code == 0, result.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("fmt", ["jsonl", "mooncake", "burstgpt"])
def test_each_format_sweeps_in_process(cli, tmp_path, files, fmt):
    doc = sweep(cli, tmp_path, f'workload.dataset.path="{files[fmt]}"',
                "engine.max_model_len=2048")  # the trace's prompts are up to 930 tokens
    (level,) = doc["levels"]
    assert level["counts"]["requests"] == 8 and level["counts"]["completed"] == 8
    prof = load_profile("default", Overrides(sets=(
        f'workload.dataset.path="{files[fmt]}"', "sweep.concurrency=[2]",
        "workload.num_requests=8", "sweep.warmup=2", "sweep.min_requests_per_client=0",
        "sweep.min_level_s=0", "engine.max_model_len=2048")))
    plan = plan_from_profile(prof)
    specs = level_specs(prof, plan, plan.levels[0])[2:]
    assert level["counts"]["prompt_tokens"] == sum(s.prompt_len for s in specs)


def test_a_multi_turn_dataset_hits_more_of_the_prefix_each_turn(cli, tmp_path, files,
                                                                tokenizer_dir):
    doc = sweep(cli, tmp_path, f'workload.dataset.path="{files["sharegpt"]}"',
                f'workload.dataset.tokenizer="{tokenizer_dir}"', "sweep.warmup=0",
                "workload.num_requests=24")
    requests = doc["levels"][0]["requests"]
    by_turn: dict[int, list[int]] = {}
    for r in requests:  # 3 turns per conversation, records in file order
        by_turn.setdefault(r["id"] % 3, []).append(r["cached_tokens"])
    means = [sum(v) / len(v) for _, v in sorted(by_turn.items())]
    assert means[0] < means[1] < means[2], means


def test_a_broken_record_is_one_line_and_exit_2(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": [1, 2, 3]}\n{"prompt": [1, true]}\n')
    out = tmp_path / "r.json"
    result = cli("sweep", *BASE, "--set", f'workload.dataset.path="{bad}"', "--json",
                 str(out))
    assert result.exit_code == 2
    assert "bad.jsonl:2: prompt[1]: expected a token id" in result.stderr
    assert "Traceback" not in result.stderr


def test_too_few_records_are_reused_with_a_warning(cli, tmp_path, files):
    out = tmp_path / "r.json"
    result = cli("sweep", *BASE, "--requests", "40", "--set",
                 f'workload.dataset.path="{files["jsonl"]}"', "--json", str(out),
                 "--format", "json", "--force")
    assert result.exit_code == 0, result.stderr
    warning = " ".join(result.stderr.split())
    assert "24 records and a level needs 42" in warning and "each about 1.8 times" in warning
    (level,) = json.loads(out.read_text())["levels"]
    assert level["counts"]["requests"] == 40 and level["counts"]["completed"] == 40
    prof = load_profile("default", Overrides(sets=(
        f'workload.dataset.path="{files["jsonl"]}"', "sweep.concurrency=[2]",
        "workload.num_requests=40", "sweep.warmup=2", "sweep.min_requests_per_client=0",
        "sweep.min_level_s=0")))
    plan = plan_from_profile(prof)
    specs = level_specs(prof, plan, plan.levels[0])
    assert [s.prompt for s in specs[24:42]] == [s.prompt for s in specs[:18]]  # in order again
    assert len({s.request_id for s in specs}) == len(specs)


def test_a_short_multi_turn_file_is_not_repeated(cli, tmp_path, files, tokenizer_dir):
    result = cli("sweep", *BASE, "--requests", "400", "--set",
                 f'workload.dataset.path="{files["sharegpt"]}"', "--set",
                 f'workload.dataset.tokenizer="{tokenizer_dir}"', "--json",
                 str(tmp_path / "r.json"))
    assert result.exit_code == 2 and "multi-turn records are not repeated" in result.stderr


def test_fragmentation_replays_the_same_trace(cli, tmp_path, files):
    out = tmp_path / "frag.json"
    result = cli("fragmentation", "--dataset", str(files["mooncake"]), "--set",
                 "engine.max_model_len=2048", "--requests", "24", "--json", str(out))
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    assert "24 requests" in result.stdout and "mean prompt 815" in result.stdout
    prefix = [p for p in doc["policies"] if p["name"].endswith("+prefix")]
    assert prefix and prefix[0]["shared_saving"] > 0  # the trace's shared first block
