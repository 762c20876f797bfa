"""Text prompts for servers that take no token ids: --tokenizer DIR (exact token counts)
and --endpoint chat, against a real perfkit serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit.loadgen.client import request_body
from perfkit.loadgen.text import load_renderer
from perfkit.remote.tiny_model import write_tiny_model
from perfkit.serve.testing import running_server
from perfkit.workload import RequestSpec

ARGS = ["--requests", "4", "--concurrency", "2", "--warmup", "0", "--no-samplers",
        "--set", "engine.cpu_threads=1", "--format", "json"]


def test_renderer_gives_exact_counts_and_avoids_specials(tmp_path: Path) -> None:
    render = load_renderer(write_tiny_model(tmp_path / "m", vocab=64)).render
    assert render((5, 6, 63)) == "t5 t6 t63"
    text = render((1, 2, 200, 7))  # specials and ids beyond the vocabulary: ordinary words
    assert len(text.split()) == 4 and "<" not in text


def test_chat_body_and_text_body() -> None:
    spec = RequestSpec(0, (5, 6), 3)
    chat = request_body(spec, "m", "chat")
    assert chat["messages"] == [{"role": "user", "content": "t5 t6"}] and "prompt" not in chat
    text = request_body(spec, "m", "completions", "x y")
    assert text["prompt"] == "x y"


def test_bad_tokenizer_and_endpoint_exit_2(cli, tmp_path: Path) -> None:
    with running_server("default", sets=("engine.cpu_threads=1",)) as base:
        bad = cli("sweep", "--target", f"{base}/v1", "--tokenizer", str(tmp_path), *ARGS)
        assert bad.exit_code == 2 and "no tokenizer.json" in bad.stderr
        bad = cli("sweep", "--target", f"{base}/v1", "--endpoint", "embeddings", *ARGS)
        assert bad.exit_code == 2 and "--endpoint" in bad.stderr
    bad = cli("sweep", "--endpoint", "chat", *ARGS)
    assert bad.exit_code == 2 and "needs --target" in bad.stderr


@pytest.mark.parametrize("extra, more_prompt_tokens", [
    (["--tokenizer", "TOK"], 0),  # the same ids, sent as their words
    (["--endpoint", "chat"], 2),  # perfkit serve's chat text adds <|user|> and <|assistant|>
])
def test_text_prompts_keep_the_token_counts(cli, tmp_path: Path, extra: list[str],
                                            more_prompt_tokens: int) -> None:
    tok = write_tiny_model(tmp_path / "tok", vocab=512)
    extra = [str(tok) if a == "TOK" else a for a in extra]
    docs = []
    with running_server("default", sets=("engine.cpu_threads=1",)) as base:
        for args in ([], extra):
            path = tmp_path / f"r{len(docs)}.json"
            done = cli("sweep", "--target", f"{base}/v1", *ARGS, *args, "--json", str(path))
            assert done.exit_code == 0, done.stderr
            docs.append(json.loads(path.read_text())["levels"][0]["counts"])
    ids, text = docs
    assert text["completed"] == ids["completed"] and text["output_tokens"] == ids["output_tokens"]
    assert text["prompt_tokens"] == ids["prompt_tokens"] + more_prompt_tokens * ids["completed"]
