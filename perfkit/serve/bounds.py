"""The server's bounds on what a client sends: body size, JSON nesting, sampling ranges.

Plain checks, no HTTP: app.py and protocol.py turn a breach into an `ApiError` (a 4xx with
OpenAI's error JSON), never a traceback.
URL and header length are bounded by aiohttp's parser (`MAX_LINE_BYTES`,
`MAX_FIELD_BYTES`); its errors become JSON in http_errors.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

MAX_BODY_BYTES = 4 * 1024 * 1024  # a 128k-token prompt as ids fits with room to spare
MAX_DEPTH = 32  # JSON nesting: chat content parts need 5; tool schemas nest (3 per level)
MAX_LINE_BYTES = 8190  # the request line (method, URL, version): aiohttp's default
MAX_FIELD_BYTES = 8190  # one header: aiohttp's default


def depth_within(value: Any, limit: int) -> bool:
    """Iterative (no recursion): is every list/dict in `value` at most `limit` deep?"""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, list | dict) else []
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, list | dict):
                if depth >= limit:
                    return False
                stack.append((child, depth + 1))
    return True


def shown(value: Any, limit: int = 40) -> str:
    """A client's value as JSON, cut to `limit` characters (inside an error message)."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (what a client sent)."""
    for types, name in ((bool, "boolean"), (int | float, "number"), (str, "string"),
                        (list, "array"), (dict, "object")):
        if isinstance(value, types):
            return name
    return "null"


def _between(low: float, high: float) -> Callable[[float], bool]:
    return lambda x: low <= x <= high


# Ranges vLLM's SamplingParams enforces (a value outside is a 400 there too).
SAMPLING_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "temperature": (lambda x: x >= 0, ">= 0"),
    "top_p": (lambda x: 0 < x <= 1, "in (0, 1]"),
    "top_k": (lambda x: x == -1 or x >= 0, "-1 (off), 0 (off) or >= 1"),
    "min_p": (_between(0, 1), "in [0, 1]"),
    "presence_penalty": (_between(-2, 2), "in [-2, 2]"),
    "frequency_penalty": (_between(-2, 2), "in [-2, 2]"),
    "repetition_penalty": (lambda x: x > 0, "> 0"),
    "min_tokens": (lambda x: x >= 0, ">= 0"),
    "seed": (lambda x: -(2**63) <= x < 2**64, "a 64-bit integer"),
    "truncate_prompt_tokens": (lambda x: x == -1 or x >= 1, "-1 or >= 1"),
}


def sampling_problem(body: dict[str, Any]) -> tuple[str, str] | None:
    """The first numeric sampling field that is not finite or out of range, and why
    (types are checked before this)."""
    for key, (ok, text) in SAMPLING_RANGES.items():
        value = body.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and not (
                math.isfinite(value) and ok(value)):
            return key, f"must be {text}, got {shown(value)}"
    return None
