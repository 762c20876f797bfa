"""Write a tiny Llama model directory that a real vLLM can serve with dummy weights.

    python -m perfkit.remote.tiny_model DIR [--vocab 4096]

The directory holds only `config.json` (a two-layer Llama, head size 32) and a
`tokenizers` WordLevel tokenizer whose words are `t3` ... `t<vocab-1>`: word `tN` is
token id N (0-2 are <unk>, <s>, </s>), so token ids and text map to each other exactly,
the same words perfkit serve reads and writes. Nothing is downloaded; `vllm serve DIR
--load-format dummy` fills the weights with random values. Plain JSON: no library needed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SPECIALS = ("<unk>", "<s>", "</s>")


def llama_config(vocab: int, max_len: int) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
        "vocab_size": vocab, "max_position_embeddings": max_len,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2,
    }


def word_level_tokenizer(vocab: int) -> dict[str, object]:
    words = {name: i for i, name in enumerate(SPECIALS)}
    words.update({f"t{i}": i for i in range(len(SPECIALS), vocab)})
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(SPECIALS)],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": words, "unk_token": "<unk>"},
    }


def write_tiny_model(path: Path, vocab: int = 4096, max_len: int = 2048) -> Path:
    if vocab <= len(SPECIALS):
        raise ValueError(f"vocab must exceed {len(SPECIALS)}, got {vocab}")
    path.mkdir(parents=True, exist_ok=True)
    files = {
        "config.json": llama_config(vocab, max_len),
        "tokenizer.json": word_level_tokenizer(vocab),
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast",
                                  "unk_token": "<unk>", "bos_token": "<s>",
                                  "eos_token": "</s>", "model_max_length": max_len},
        "generation_config.json": {"bos_token_id": 1, "eos_token_id": 2},
    }
    for name, body in files.items():
        (path / name).write_text(json.dumps(body), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--max-len", type=int, default=2048)
    args = parser.parse_args(argv)
    print(write_tiny_model(args.dir, args.vocab, args.max_len))


if __name__ == "__main__":
    main()
