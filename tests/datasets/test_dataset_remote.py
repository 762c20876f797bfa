"""Datasets against a running perfkit serve: the same requests and token counts as the
in-process sweep of the same file (token ids and lengths-only traces need no tokenizer)."""

from __future__ import annotations

import json

import pytest

SAME = ("requests", "completed", "prompt_tokens", "output_tokens")
ARGS = ["--concurrency", "2", "--requests", "8", "--warmup", "1",
        "--set", "sweep.min_requests_per_client=0", "--set", "engine.cpu_threads=1"]


def sweep(cli, path, *args: str) -> dict:
    result = cli("sweep", *ARGS, *args, "--json", str(path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(path.read_text())


@pytest.mark.parametrize("fmt", ["jsonl", "burstgpt", "mooncake", "sharegpt"])
def test_a_dataset_sweeps_a_server_like_the_engine(cli, tmp_path, files, tokenizer_dir, fmt):
    testing = pytest.importorskip("perfkit.serve.testing")
    data = ["--dataset", str(files[fmt]), "--set", "engine.max_model_len=2048"]
    if fmt == "sharegpt":  # text: tokenized here, sent as token ids
        data += ["--tokenizer", str(tokenizer_dir)]
    local = sweep(cli, tmp_path / "local.json", *data)
    server_sets = ("engine.cpu_threads=1", "engine.max_model_len=2048")
    with testing.running_server("default", sets=server_sets) as base:
        remote = sweep(cli, tmp_path / "remote.json", *data, "--target", f"{base}/v1")
    for here, there in zip(local["levels"], remote["levels"], strict=True):
        assert {k: here["counts"][k] for k in SAME} == {k: there["counts"][k] for k in SAME}
        assert there["errors"]["total"] == 0
