"""OpenAI-shaped bodies: completions and chat completions, whole or as SSE chunks.

Streaming sends one chunk per token; the last token's chunk carries the
finish_reason (as vLLM does). A request cut short by shutdown or an engine failure
ends with an empty chunk whose finish_reason is "abort" (vLLM's word for it).
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


def _choice(head: ResponseHead, text: str, finish: str | None, first: bool,
            stream: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0}
    if not head.chat:
        choice["text"] = text
    elif stream:
        choice["delta"] = ({"role": "assistant"} if first else {}) | {"content": text}
    else:
        choice["message"] = {"role": "assistant", "content": text}
    return choice | {"logprobs": None, "finish_reason": finish}


def chunk(head: ResponseHead, text: str, finish: str | None, first: bool,
          with_usage_field: bool) -> bytes:
    """One streamed token (or the closing empty chunk); `usage: null` when usage is asked."""
    body = head.envelope(stream=True) | {"choices": [_choice(head, text, finish, first, True)]}
    if with_usage_field:
        body["usage"] = None
    return sse(body)


def usage_chunk(head: ResponseHead, usage: Usage) -> bytes:
    return sse(head.envelope(stream=True) | {"choices": [], "usage": usage.to_dict()})


def whole(head: ResponseHead, text: str, finish: str, usage: Usage) -> dict[str, Any]:
    return head.envelope(stream=False) | {
        "choices": [_choice(head, text, finish, first=True, stream=False)],
        "usage": usage.to_dict(),
    }


def models(model: str, created: int) -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": model, "object": "model", "created": created, "owned_by": "perfkit"}]}
