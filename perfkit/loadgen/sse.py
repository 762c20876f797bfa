"""Server-sent events of an OpenAI-style streaming completion.

The wire format (text/event-stream): each event is one or more `data: ...` lines
ended by a blank line; lines starting with `:` are comments (keep-alives); other
fields (`event:`, `id:`, `retry:`) are ignored here. A completion stream sends one
JSON object per event and ends with `data: [DONE]`:

    data: {"choices": [{"index": 0, "text": " the", "finish_reason": null}]}

    data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}

    data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}

    data: [DONE]

Events are split on their blank line over the bytes read, not line by line, so a
read holding several events yields them all with the read's one arrival time, and a
single event of any size is read whole.

A chunk may carry several tokens (servers coalesce them, or hold back text that
is not yet a whole character), so token counts come from `usage` when the server
sends it, and chunk arrival times are the inter-token samples. A request with several
choices (n) streams each choice's chunks with its `index` (one choice per chunk, as
vLLM and perfkit serve send them).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

DONE = b"[DONE]"


class SseParser:
    """Feed raw bytes as they are read (any split); get the data of each complete event.

    Events are found by their blank line over the whole buffer, never line by line, so an
    event of any size (a 1 MB chunk) is one event: no read-buffer or line-length limit.
    Line endings may be LF, CRLF or CR (a CR at the end of a read waits for the next)."""

    def __init__(self) -> None:
        self._rest = b""  # bytes of the event in progress, LF line endings only
        self._cr = False  # the last read ended with a CR: its LF may start the next

    def feed(self, raw: bytes) -> list[bytes]:
        """The data of every event this read completes, in order (maybe none)."""
        if self._cr or b"\r" in raw:
            raw = self._lf(raw)
        blocks = (self._rest + raw if self._rest else raw).split(b"\n\n")
        self._rest = blocks.pop()  # the unfinished event (b"" after a whole one)
        return [d for block in blocks if (d := _event_data(block)) is not None]

    def _lf(self, raw: bytes) -> bytes:
        """CRLF and CR line endings as LF; a CR that ends the read waits for the next."""
        if self._cr:
            raw, self._cr = b"\r" + raw, False
        if raw.endswith(b"\r"):
            raw, self._cr = raw[:-1], True
        return raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def close(self) -> bytes | None:
        """Data of a last event the stream ended without a blank line after."""
        rest = self._rest.strip(b"\n")
        self._rest, self._cr = b"", False
        return _event_data(rest) if rest else None


def _event_data(block: bytes) -> bytes | None:
    """An event's data lines joined by LF; None when it has none (comments, keep-alives)."""
    if block[:6] == b"data: " and b"\n" not in block:
        return block[6:]  # the common case: one data line
    data = []
    for line in block.split(b"\n"):
        if line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if field == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(data) if data else None


class Chunk(NamedTuple):
    """What one event says about the request (a tuple: one per streamed chunk)."""

    has_token: bool  # a choice that carries output (text, or a chunk before the finish)
    finish_reason: str | None
    usage: dict[str, Any] | None
    error: str | None  # an error object the server sent inside the stream
    choice: int = 0  # the index of the choice the chunk belongs to (n > 1)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)
    return str(error)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


TOKEN = Chunk(True, None, None, None)
_NULL_REASON = (b'"finish_reason":null', b'"finish_reason": null')


def parse_chunk(data: str | bytes) -> Chunk:
    """One event's JSON; ValueError when it is not a JSON object. Fields of the wrong
    type count as absent: a malformed chunk never raises anything else.

    Most chunks of a stream are one token, with one finish_reason, null, and neither usage
    nor an error, and choice 0 (or no index): those are known without decoding the JSON
    (quotes inside JSON strings are escaped, so these byte patterns can only be keys; a
    test holds this fast path to the decoder on any JSON). Anything else is decoded."""
    if (isinstance(data, bytes) and data[:1] == b"{" and data[-1:] == b"}"
            and data.count(b'"finish_reason"') == 1
            and (_NULL_REASON[0] in data or _NULL_REASON[1] in data)
            and b'"usage"' not in data and b'"error"' not in data
            and _first_choice(data)):
        return TOKEN
    obj = json.loads(data.decode("utf-8", "replace") if isinstance(data, bytes) else data)
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
    index = _int(choice.get("index")) or 0
    # A chunk without a finish reason is a token chunk even if its text is empty (a
    # token that decodes to nothing yet); the finishing chunk counts only with text.
    return Chunk(bool(text) or reason is None, reason, usage, None, max(index, 0))


def _first_choice(data: bytes) -> bool:
    """The chunk's one "index" key is 0 (JSON writes no digit after a leading 0), or it
    has none: choice 0's."""
    count = data.count(b'"index"')
    return count == 0 or (count == 1 and (b'"index":0' in data or b'"index": 0' in data))


def response_id(data: bytes) -> str | None:
    """An event's top-level "id" (the server's response id, e.g. vLLM's "cmpl-..."); None
    when it has none. Decodes the JSON: ask once per stream, not on the fast path."""
    try:
        obj = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None
    rid = obj.get("id") if isinstance(obj, dict) else None
    return rid if isinstance(rid, str) and rid else None


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
