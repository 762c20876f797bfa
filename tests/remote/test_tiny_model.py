"""The tiny model directory for a real vLLM: a Llama config and a word-level tokenizer."""

from __future__ import annotations

import json

import pytest

from perfkit.remote.tiny_model import main, write_tiny_model


def test_words_are_token_ids(tmp_path) -> None:
    path = write_tiny_model(tmp_path / "m", vocab=64, max_len=256)
    config = json.loads((path / "config.json").read_text())
    assert config["vocab_size"] == 64 and config["max_position_embeddings"] == 256
    assert config["architectures"] == ["LlamaForCausalLM"]
    vocab = json.loads((path / "tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) == 64 and vocab["t3"] == 3 and vocab["t63"] == 63 and vocab["</s>"] == 2


def test_bad_vocab_and_cli(tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match="vocab"):
        write_tiny_model(tmp_path / "m", vocab=2)
    main([str(tmp_path / "c"), "--vocab", "16"])
    assert (tmp_path / "c" / "tokenizer_config.json").is_file()
    assert str(tmp_path / "c") in capsys.readouterr().out
