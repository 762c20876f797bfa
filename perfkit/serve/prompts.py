"""Prompts of a request body -> token ids: a completion's prompt (a string, token ids, or a
batch of either: one choice per prompt) and a chat's messages (tokens.py's template)."""

from __future__ import annotations

from typing import Any

from perfkit.serve.bounds import json_type, shown
from perfkit.serve.errors import invalid
from perfkit.serve.tokens import chat_text, tokenize

MAX_BATCH = 64  # prompts in one completions request (each is a request in the engine)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _token_ids(value: list[Any], vocab_size: int, param: str) -> list[int]:
    for i, token in enumerate(value):
        if not _is_int(token):
            raise invalid(f"{param}[{i}]", f"token ids must be integers, got {shown(token)}",
                          "invalid_type")
        if not 0 <= token < vocab_size:
            raise invalid(f"{param}[{i}]", f"expected a token id in [0, {vocab_size}), "
                          f"got {token}")
    return list(value)


def _one(value: Any, vocab_size: int, param: str) -> list[int]:
    if isinstance(value, str):
        ids = tokenize(value, vocab_size)
    elif isinstance(value, list) and not any(isinstance(t, str | list) for t in value):
        ids = _token_ids(value, vocab_size, param)
    elif value is None:
        raise invalid("prompt", "required: a string or a list of token ids", "missing_field")
    else:
        raise invalid(param, "expected a string or a list of token ids, got "
                      f"{json_type(value)} {shown(value)}", "invalid_type")
    if not ids:
        raise invalid(param, "is empty (no words or token ids)")
    return ids


def is_batch(value: Any) -> bool:
    """A list of strings or of token-id lists (not a list of token ids)."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(p, str | list) for p in value)


def parse_prompt(value: Any, vocab_size: int) -> list[int]:
    """One prompt: a string, a list of token ids, or a batch of exactly one of those."""
    if is_batch(value) and len(value) == 1:
        value = value[0]
    if is_batch(value):
        raise invalid("prompt", "a batch of prompts is not allowed here; send one",
                      "unsupported_value")
    return _one(value, vocab_size, "prompt")


def parse_prompts(value: Any, vocab_size: int) -> list[tuple[list[int], str | None]]:
    """A completion's prompts, each with its text when given as a string (for echo)."""
    if not is_batch(value):
        return [(_one(value, vocab_size, "prompt"), value if isinstance(value, str) else None)]
    if len(value) > MAX_BATCH:
        raise invalid("prompt", f"at most {MAX_BATCH} prompts in one request, got {len(value)}")
    return [(_one(p, vocab_size, f"prompt[{i}]"), p if isinstance(p, str) else None)
            for i, p in enumerate(value)]


def _content(message: dict[str, Any], i: int) -> str:
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content):
        return " ".join(p["text"] for p in content)
    raise invalid(f"messages[{i}].content", "expected a string or a list of text parts")


def parse_messages(value: Any, vocab_size: int) -> list[int]:
    if not isinstance(value, list) or not value:
        raise invalid("messages", "required: a non-empty list of {role, content}",
                      "missing_field")
    pairs = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid(f"messages[{i}]", "expected an object with a string role")
        pairs.append((message["role"], _content(message, i)))
    return tokenize(chat_text(pairs), vocab_size)
