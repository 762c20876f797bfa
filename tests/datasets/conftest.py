"""Small dataset files in every format, written by the tests (no dataset is downloaded),
and a word-level tokenizer: word tN is token id N."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

WORDS = [f"t{i}" for i in range(3, 300)]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    vocab = {"[UNK]": 0} | {w: int(w[1:]) for w in WORDS}
    tok = tokenizers.Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    folder = tmp_path / "tok"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rng = random.Random(7)
    out = {}
    convs = [{"id": f"c{i}", "conversations": [
        m for _ in range(3) for m in ({"from": "human", "value": _text(rng, 20)},
                                      {"from": "gpt", "value": _text(rng, 6)})]}
        for i in range(8)]
    out["sharegpt"] = tmp_path / "chats.json"
    out["sharegpt"].write_text(json.dumps(convs))
    out["jsonl"] = tmp_path / "prompts.jsonl"
    out["jsonl"].write_text("".join(json.dumps(
        {"prompt": [rng.randint(1, 250) for _ in range(rng.randint(10, 40))], "output_len": 6})
        + "\n" for _ in range(24)))
    out["mooncake"] = tmp_path / "trace.jsonl"
    out["mooncake"].write_text("".join(json.dumps(
        {"timestamp": 100 * i + (37 if i % 3 else 0), "input_length": 700 + 10 * i,
         "output_length": 5, "hash_ids": [0, 1000 + i]}) + "\n" for i in range(24)))
    out["burstgpt"] = tmp_path / "burst.csv"
    out["burstgpt"].write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        + "".join(f"{i * 0.5},ChatGPT,{20 + i},{4 + i % 3},{24 + i},Conversation log\n"
                  for i in range(24))
        + "12.5,ChatGPT,0,0,0,Conversation log\n")  # a failed request: skipped
    return out
