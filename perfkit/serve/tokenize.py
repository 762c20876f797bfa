"""vLLM's /tokenize and /detokenize, over perfkit serve's word <-> id mapping (tokens.py).

    POST /tokenize    {"model"?, "prompt": str | [ids]} or {"model"?, "messages": [...]}
                      -> {"count", "max_model_len", "tokens"}
    POST /detokenize  {"model"?, "tokens": [ids]} -> {"prompt": "t5 t6 ..."}

`vllm bench serve` probes them to check that its prompts have the lengths it meant. Text
and ids round-trip exactly: detokenize gives words `t<id>` that tokenize maps back.
"""

from __future__ import annotations

from typing import Any

from perfkit.serve.errors import ApiError, invalid
from perfkit.serve.prompts import parse_messages, parse_prompt
from perfkit.serve.protocol import ModelInfo

_TOKENIZE_FIELDS = frozenset({"model", "prompt", "messages", "add_special_tokens",
                              "add_generation_prompt", "return_token_strs"})


def _body(body: Any, model: ModelInfo, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    for key in body:
        if key not in allowed:
            raise invalid(key, "unknown field (not supported by perfkit serve)", "unknown_field")
    name = body.get("model")
    if name is not None and name != model.name:
        raise ApiError(404, f"The model {name!r} does not exist; this server serves "
                       f"{model.name!r}", param="model", code="model_not_found")
    return body


def tokenize_reply(body: Any, model: ModelInfo, max_model_len: int) -> dict[str, Any]:
    body = _body(body, model, _TOKENIZE_FIELDS)
    if body.get("messages") is not None:
        ids = parse_messages(body["messages"], model.vocab_size)
    else:
        ids = parse_prompt(body.get("prompt"), model.vocab_size)
    return {"count": len(ids), "max_model_len": max_model_len, "tokens": ids}


def detokenize_reply(body: Any, model: ModelInfo) -> dict[str, Any]:
    body = _body(body, model, frozenset({"model", "tokens"}))
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        raise invalid("tokens", "required: a list of token ids", "missing_field")
    for i, token in enumerate(tokens):
        if not isinstance(token, int) or isinstance(token, bool) \
                or not 0 <= token < model.vocab_size:
            raise invalid(f"tokens[{i}]", f"expected a token id in [0, {model.vocab_size}), "
                          f"got {token!r}")
    return {"prompt": " ".join(f"t{t}" for t in tokens)}
