"""Request bodies of /v1/completions and /v1/chat/completions -> `GenerateRequest`.

Anything wrong raises `ApiError` (an HTTP status and OpenAI's error body). Sampling
fields of OpenAI's and vLLM's APIs (temperature, top_p, top_k, min_p, seed, stop,
repetition/presence/frequency penalties, ...) are type-checked, accepted and ignored: the
profile decides sampling, and the response says which were ignored (the header
`X-Perfkit-Ignored`, given values other than the neutral one). Fields that would change
the response's shape (n > 1, best_of, echo, logprobs, suffix) are refused; unknown
fields are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfkit.serve.bounds import json_type, sampling_problem, shown
from perfkit.serve.tokens import chat_text, tokenize

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for completions; used for chat too


class ApiError(Exception):
    """An error answer: status and OpenAI's `{"error": {message, type, param, code}}`."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None, type_: str = "invalid_request_error",
                 retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type_
        self.retry_after_s = retry_after_s  # sent as the Retry-After header (429, 503)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def invalid(param: str, message: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, f"{param}: {message}", param=param, code=code)


@dataclass(frozen=True)
class ModelInfo:
    name: str  # the one model id served (the profile's name)
    vocab_size: int


@dataclass(frozen=True)
class GenerateRequest:
    chat: bool  # /v1/chat/completions (else /v1/completions)
    prompt: tuple[int, ...]  # token ids
    max_tokens: int  # requested output tokens (the engine also stops at max_model_len)
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with usage
    priority: int = 0  # vLLM's extension: lower runs first
    tool_call: bool = False  # perfkit's extension: output is a guarded tool call
    ignored: tuple[str, ...] = ()  # sampling fields given a non-neutral value, not honoured


_NUMBER = (int, float)
# Accepted and ignored: they cannot change the output of this engine.
_IGNORED: dict[str, tuple[type, ...]] = {
    "temperature": _NUMBER, "top_p": _NUMBER, "presence_penalty": _NUMBER,
    "frequency_penalty": _NUMBER, "seed": (int,), "user": (str,), "stop": (str, list),
    "logit_bias": (dict,), "ignore_eos": (bool,), "min_tokens": (int,),
    # vLLM's sampling extensions (`vllm bench serve` always sends repetition_penalty)
    "repetition_penalty": _NUMBER, "top_k": (int,), "min_p": _NUMBER,
    "length_penalty": _NUMBER, "stop_token_ids": (list,), "bad_words": (list,),
    "include_stop_str_in_output": (bool,), "skip_special_tokens": (bool,),
    "spaces_between_special_tokens": (bool,), "add_special_tokens": (bool,),
    "truncate_prompt_tokens": (int,),
}
# What each ignored field's value means "no change" at (absent from the report then).
# ignore_eos is honoured in effect: the engine never stops at EOS.
_NO_CHANGE: dict[str, tuple[Any, ...]] = {
    "temperature": (0, 1), "top_p": (1,), "presence_penalty": (0,), "frequency_penalty": (0,),
    "repetition_penalty": (1,), "top_k": (0, -1), "min_p": (0,), "length_penalty": (1,),
    "ignore_eos": (True, False), "logit_bias": ({},), "stop": ([],),
    "stop_token_ids": ([],), "bad_words": ([],), "include_stop_str_in_output": (True, False),
    "skip_special_tokens": (True, False), "spaces_between_special_tokens": (True, False),
    "add_special_tokens": (True, False), "min_tokens": (0,),
}
# Accepted only at their neutral value.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "best_of": (None, 1), "echo": (None, False), "logprobs": (None, False),
    "suffix": (None, ""), "top_logprobs": (None, 0),
}
_COMMON = {"model", "max_tokens", "stream", "stream_options", "priority", "tool_call",
           *_IGNORED, *_NEUTRAL}
COMPLETION_FIELDS = frozenset({*_COMMON, "prompt"}) - {"top_logprobs"}
CHAT_FIELDS = frozenset({*_COMMON, "messages", "max_completion_tokens"}) - {
    "best_of", "echo", "suffix"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_fields(body: dict[str, Any], allowed: frozenset[str]) -> None:
    for key in body:
        if key not in allowed:
            raise invalid(key, "unknown field (not supported by perfkit serve)", "unknown_field")
    for key, types in _IGNORED.items():
        value = body.get(key)
        if value is not None and (not isinstance(value, types) or
                                  (isinstance(value, bool) and bool not in types)):
            raise invalid(key, f"expected {' or '.join(t.__name__ for t in types)}")
    for key, neutral in _NEUTRAL.items():
        if key in allowed and body.get(key) not in neutral:
            raise invalid(key, f"only {neutral[-1]!r} is supported", "unsupported_value")


def ignored_fields(body: dict[str, Any]) -> tuple[str, ...]:
    """The sampling fields this request sets to a value the engine does not honour."""
    return tuple(sorted(key for key in _IGNORED if key != "user" and body.get(key) is not None
                        and body[key] not in _NO_CHANGE.get(key, ())))


def _check_model(body: dict[str, Any], model: ModelInfo) -> None:
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise invalid("model", "required: the model id (see GET /v1/models)", "missing_field")
    if name != model.name:
        raise ApiError(404, f"The model {name!r} does not exist; this server serves "
                       f"{model.name!r}", param="model", code="model_not_found")


def _int_field(body: dict[str, Any], key: str, default: int, minimum: int | None) -> int:
    value = body.get(key)
    if value is None:
        return default
    if not _is_int(value):
        raise invalid(key, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise invalid(key, f"must be >= {minimum}, got {value}")
    return int(value)


def _bool_field(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(key, f"expected true or false, got {value!r}")
    return value


def _include_usage(body: dict[str, Any], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise invalid("stream_options", "only allowed when stream is true")
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise invalid("stream_options", "expected {\"include_usage\": true|false}")
    return _bool_field(options, "include_usage")


def _token_ids(value: list[Any], vocab_size: int, param: str) -> list[int]:
    for i, token in enumerate(value):
        if not _is_int(token):
            raise invalid(f"{param}[{i}]", f"token ids must be integers, got {shown(token)}",
                          "invalid_type")
        if not 0 <= token < vocab_size:
            raise invalid(f"{param}[{i}]", f"expected a token id in [0, {vocab_size}), "
                          f"got {token}")
    return list(value)


def parse_prompt(value: Any, vocab_size: int) -> list[int]:
    """A string, a list of token ids, or a batch of exactly one of those."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]  # a batch of one
    if isinstance(value, str):
        ids = tokenize(value, vocab_size)
    elif isinstance(value, list) and not any(isinstance(t, str | list) for t in value):
        ids = _token_ids(value, vocab_size, "prompt")
    elif isinstance(value, list):
        raise invalid("prompt", "batched prompts are not supported; send one per request",
                      "unsupported_value")
    elif value is None:
        raise invalid("prompt", "required: a string or a list of token ids", "missing_field")
    else:
        raise invalid("prompt", "expected a string or a list of token ids, got "
                      f"{json_type(value)} {shown(value)}", "invalid_type")
    if not ids:
        raise invalid("prompt", "is empty (no words or token ids)")
    return ids


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


def parse_request(body: Any, model: ModelInfo, chat: bool) -> GenerateRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    _check_fields(body, CHAT_FIELDS if chat else COMPLETION_FIELDS)
    if (problem := sampling_problem(body)) is not None:
        raise invalid(*problem)
    _check_model(body, model)
    if chat:
        prompt = parse_messages(body.get("messages"), model.vocab_size)
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None \
            else "max_tokens"
    else:
        prompt = parse_prompt(body.get("prompt"), model.vocab_size)
        key = "max_tokens"
    stream = _bool_field(body, "stream")
    return GenerateRequest(
        chat=chat, prompt=tuple(prompt), max_tokens=_int_field(body, key, DEFAULT_MAX_TOKENS, 1),
        stream=stream, include_usage=_include_usage(body, stream),
        priority=_int_field(body, "priority", 0, None), tool_call=_bool_field(body, "tool_call"),
        ignored=ignored_fields(body),
    )
