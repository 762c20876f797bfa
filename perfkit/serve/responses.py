"""OpenAI-shaped bodies: completions and chat completions, whole or as SSE chunks.

Streaming sends one chunk per token of each choice (tagged with its index); the last
token's chunk carries the finish_reason (as vLLM does). A request cut short by shutdown or
an engine failure ends with an empty chunk whose finish_reason is "abort" (vLLM's word for
it). Chat choices carry tool calls as OpenAI's `tool_calls` (whole, or deltas in chunks).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens found in the prefix cache (first admission)

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens}}


@dataclass(frozen=True)
class ResponseHead:
    """What every chunk of one response repeats."""

    chat: bool
    model: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))

    def envelope(self, stream: bool) -> dict[str, Any]:
        if self.chat:
            kind = "chat.completion.chunk" if stream else "chat.completion"
            rid = f"chatcmpl-{self.id}"
        else:
            kind, rid = "text_completion", f"cmpl-{self.id}"
        return {"id": rid, "object": kind, "created": self.created, "model": self.model}


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


@dataclass(frozen=True)
class Choice:
    """One choice's part of a body or chunk (OpenAI's fields; stop_reason is vLLM's)."""

    index: int
    text: str | None  # completion text or chat content (None: tool calls instead)
    finish: str | None = None
    stop_reason: str | int | None = None  # the stop string or stop token that ended it
    logprobs: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None  # whole calls, or a chunk's deltas
    first: bool = False  # a stream's first chunk of this choice (chat: role)
    prompt_logprobs: list[Any] | None = None  # vLLM's, completions (whole bodies)


def _choice(head: ResponseHead, c: Choice, stream: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"index": c.index}
    if not head.chat:
        out["text"] = c.text or ""
    elif stream:
        delta: dict[str, Any] = {"role": "assistant"} if c.first else {}
        if c.tool_calls is not None:
            if c.tool_calls:
                delta["tool_calls"] = c.tool_calls
        else:
            delta["content"] = c.text or ""
        out["delta"] = delta
    else:
        message: dict[str, Any] = {"role": "assistant", "content": c.text}
        if c.tool_calls:
            message["tool_calls"] = c.tool_calls
        out["message"] = message
    out |= {"logprobs": c.logprobs, "finish_reason": c.finish, "stop_reason": c.stop_reason}
    if c.prompt_logprobs is not None and not head.chat:
        out["prompt_logprobs"] = c.prompt_logprobs
    return out


def chunk(head: ResponseHead, choice: Choice, usage: Usage | None,
          with_usage_field: bool) -> bytes:
    """One streamed token of one choice (or its closing empty chunk). With usage asked,
    `usage` is null, or the running counts with continuous_usage_stats."""
    body = head.envelope(stream=True) | {"choices": [_choice(head, choice, True)]}
    if with_usage_field:
        body["usage"] = None if usage is None else usage.to_dict()
    return sse(body)


def usage_chunk(head: ResponseHead, usage: Usage) -> bytes:
    return sse(head.envelope(stream=True) | {"choices": [], "usage": usage.to_dict()})


def whole(head: ResponseHead, choices: list[Choice], usage: Usage,
          prompt_logprobs: list[Any] | None = None) -> dict[str, Any]:
    body = head.envelope(stream=False) | {
        "choices": [_choice(head, c, stream=False) for c in choices],
        "usage": usage.to_dict(),
    }
    if head.chat and prompt_logprobs is not None:
        body["prompt_logprobs"] = prompt_logprobs
    return body


def models(model: str, created: int) -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": model, "object": "model", "created": created, "owned_by": "perfkit"}]}
