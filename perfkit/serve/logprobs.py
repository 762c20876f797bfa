"""Logprobs in OpenAI's shapes (as vLLM writes them).

    completions  {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: lp}],
                  "text_offset": [...]}; echo puts the prompt's tokens first (the first
                  with null logprobs: nothing comes before it)
    chat         {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
                  "logprob", "bytes"}]}]}
    prompt_logprobs (vLLM's)  [null, {"<id>": {"logprob", "rank", "decoded_token"}}, ...]

A logprob of -inf (a token the guard forbade) is written as -9999.0, as vLLM does: JSON has
no infinity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfkit.engine.sequence import TokenLogprobs

FLOOR = -9999.0
Render = Callable[[int], str]  # token id -> its text in this output


def clamp(logprob: float) -> float:
    return max(logprob, FLOOR)


@dataclass
class CompletionLogprobs:
    """The completions `logprobs` object, grown chunk by chunk (text_offset running on)."""

    offset: int = 0  # characters of text before the next token

    def entries(self, items: list[tuple[int, TokenLogprobs | None]], render: Render
                ) -> dict[str, Any]:
        out: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                     "text_offset": []}
        for token, lp in items:
            text = render(token)
            out["tokens"].append(text)
            out["text_offset"].append(self.offset)
            self.offset += len(text)
            if lp is None:
                out["token_logprobs"].append(None)
                out["top_logprobs"].append(None)
                continue
            top = {render(t): clamp(v) for t, v in lp.top}
            top[text] = clamp(lp.logprob)  # vLLM: the top N and the token taken
            out["token_logprobs"].append(clamp(lp.logprob))
            out["top_logprobs"].append(top)
        return out


def _chat_entry(text: str, logprob: float) -> dict[str, Any]:
    return {"token": text, "logprob": clamp(logprob), "bytes": list(text.encode())}


def chat_logprobs(items: list[tuple[int, TokenLogprobs | None]], render: Render
                  ) -> dict[str, Any]:
    content = []
    for token, lp in items:
        if lp is None:
            continue
        entry = _chat_entry(render(token), lp.logprob)
        entry["top_logprobs"] = [_chat_entry(render(t), v) for t, v in lp.top]
        content.append(entry)
    return {"content": content}


def prompt_logprobs(items: list[TokenLogprobs | None], render: Render) -> list[Any]:
    out: list[Any] = []
    for lp in items:
        if lp is None:
            out.append(None)
            continue
        ranked = {t: (v, i + 1) for i, (t, v) in enumerate(lp.top)}
        ranked[lp.token] = (lp.logprob, lp.rank)
        out.append({str(t): {"logprob": clamp(v), "rank": r, "decoded_token": render(t)}
                    for t, (v, r) in ranked.items()})
    return out
