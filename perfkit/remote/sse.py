"""Server-sent events of an OpenAI-style streaming completion, line by line.

The wire format (text/event-stream): each event is one or more `data: ...` lines
ended by a blank line; lines starting with `:` are comments (keep-alives); other
fields (`event:`, `id:`, `retry:`) are ignored here. A completion stream sends one
JSON object per event and ends with `data: [DONE]`:

    data: {"choices": [{"index": 0, "text": " the", "finish_reason": null}]}

    data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}

    data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}

    data: [DONE]

A chunk may carry several tokens (servers coalesce them, or hold back text that
is not yet a whole character), so token counts come from `usage` when the server
sends it, and chunk arrival times are the inter-token samples.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"


class SseParser:
    """Feed raw lines (bytes, with or without the line ending); get complete event data."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, raw: bytes) -> str | None:
        """The data of the event this line completes, or None."""
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def close(self) -> str | None:
        """Data of a last event the stream ended without a blank line after."""
        return self._dispatch()

    def _dispatch(self) -> str | None:
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data = []
        return data


@dataclass(frozen=True)
class Chunk:
    """What one event says about the request."""

    has_token: bool  # a choice that carries output (text, or a chunk before the finish)
    finish_reason: str | None
    usage: dict[str, Any] | None
    error: str | None  # an error object the server sent inside the stream


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)
    return str(error)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_chunk(data: str) -> Chunk:
    """One event's JSON; ValueError when it is not a JSON object. Fields of the wrong
    type count as absent: a malformed chunk never raises anything else."""
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    if "error" in obj:
        return Chunk(False, None, None, _error_text(obj["error"]))
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    if not isinstance(choice, dict):
        return Chunk(False, None, usage, None)
    reason = choice.get("finish_reason")
    reason = reason if isinstance(reason, str) else None
    delta = choice.get("delta")
    text = _str(choice.get("text")) or (_str(delta.get("content")) if isinstance(delta, dict)
                                        else "")
    # A chunk without a finish reason is a token chunk even if its text is empty (a
    # token that decodes to nothing yet); the finishing chunk counts only with text.
    return Chunk(bool(text) or reason is None, reason, usage, None)


def usage_counts(usage: dict[str, Any] | None) -> tuple[int | None, int | None, int | None]:
    """(prompt_tokens, completion_tokens, cached_tokens) from a usage object; None if absent."""
    if not usage:
        return None, None, None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return (_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")),
            _int(cached))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
