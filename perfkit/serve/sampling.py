"""A request body's sampling, stop and logprobs fields -> the engine's SamplingParams.

Ranges are vLLM's (bounds.SAMPLING_RANGES, checked before this); what is left here are the
rules that need the model: token ids in the vocabulary, min_tokens <= max_tokens, at most
MAX_LOGPROBS logprobs. A field that is absent keeps the server's default: the profile's
engine.sampling decides the temperature (greedy unless the profile says "random"; vLLM
would default to 1.0), and the server's EOS token (none unless --eos-token-id).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from perfkit.engine.sampling_params import SamplingParams
from perfkit.serve.bounds import shown
from perfkit.serve.errors import invalid

MAX_LOGPROBS = 20  # vLLM's default max_logprobs


def _token(value: Any, vocab_size: int, param: str) -> int:
    try:
        token = int(value)
    except (TypeError, ValueError):
        raise invalid(param, f"expected a token id, got {shown(value)}") from None
    if isinstance(value, bool | float) or not 0 <= token < vocab_size:
        raise invalid(param, f"expected a token id in [0, {vocab_size}), got {shown(value)}")
    return token


def _logit_bias(value: dict[str, Any] | None, vocab_size: int) -> tuple[tuple[int, float], ...]:
    out: dict[int, float] = {}
    for key, bias in (value or {}).items():
        token = _token(key, vocab_size, f"logit_bias[{key!r}]")
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
            raise invalid(f"logit_bias[{key!r}]", f"expected a number in [-100, 100], got "
                          f"{shown(bias)}")
        out[token] = float(bias)
    return tuple(sorted(out.items()))


def _stop(value: str | list[Any] | None) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else list(value or [])
    for i, stop in enumerate(stops):
        if not isinstance(stop, str) or not stop:
            raise invalid(f"stop[{i}]", f"expected a non-empty string, got {shown(stop)}")
    return tuple(stops)


def _count(value: Any, param: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LOGPROBS:
        raise invalid(param, f"must be an integer in [0, {MAX_LOGPROBS}], got {shown(value)}")
    return int(value)


def logprobs_of(body: dict[str, Any], chat: bool) -> int | None:
    """Top logprobs per output token (0: the sampled token's only), None when off. Chat:
    logprobs true + top_logprobs N; completions: logprobs N."""
    if not chat:
        return _count(body.get("logprobs"), "logprobs")
    on, top = body.get("logprobs"), body.get("top_logprobs")
    if on is not None and not isinstance(on, bool):
        raise invalid("logprobs", f"expected true or false, got {shown(on)}")
    if top is not None and not on:
        raise invalid("top_logprobs", "needs logprobs: true")
    return (_count(top, "top_logprobs") or 0) if on else None


def sampling_params(body: dict[str, Any], chat: bool, base: SamplingParams, vocab_size: int,
                    max_tokens: int, echo: bool) -> SamplingParams:
    """`base`: the server's defaults (temperature, eos_token_id)."""
    min_tokens = body.get("min_tokens") or 0
    if min_tokens > max_tokens:
        raise invalid("min_tokens", f"must be <= max_tokens ({max_tokens}), got {min_tokens}")
    logprobs = logprobs_of(body, chat)
    prompt_logprobs = _count(body.get("prompt_logprobs"), "prompt_logprobs")
    if echo and logprobs is not None and prompt_logprobs is None:
        prompt_logprobs = logprobs  # echo shows the prompt's tokens with their logprobs
    top_k = body.get("top_k")
    values: dict[str, Any] = {
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "top_k": -1 if top_k is None else top_k, "min_p": body.get("min_p"),
        "seed": body.get("seed"), "presence_penalty": body.get("presence_penalty"),
        "frequency_penalty": body.get("frequency_penalty"),
        "repetition_penalty": body.get("repetition_penalty"),
        "ignore_eos": body.get("ignore_eos"),
        "include_stop_str_in_output": body.get("include_stop_str_in_output"),
    }
    stop_ids = [_token(t, vocab_size, f"stop_token_ids[{i}]")
                for i, t in enumerate(body.get("stop_token_ids") or [])]
    return dataclasses.replace(
        base, **{k: v for k, v in values.items() if v is not None},
        logit_bias=_logit_bias(body.get("logit_bias"), vocab_size),
        stop=_stop(body.get("stop")), stop_token_ids=tuple(stop_ids), min_tokens=min_tokens,
        logprobs=logprobs, prompt_logprobs=prompt_logprobs, output_text=True,
    )
