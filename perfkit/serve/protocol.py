"""Request bodies of /v1/completions and /v1/chat/completions -> `GenerateRequest`.

Anything wrong raises `ApiError` (an HTTP status and OpenAI's error body) naming the
field. What each field does is in fields.py: sampling, stop and logprobs fields are
applied (sampling.py), tools and response formats go through the guard (structured.py),
fields that change nothing here are accepted and named in the `X-Perfkit-Ignored` header,
values perfkit cannot honour (suffix, ...) are refused, unknown fields too. Several
outputs: `n` choices of each prompt (parallel samples sharing the prompt's KV blocks),
`best_of` >= n samples of which the n most likely are returned (not while streaming:
they are known only at the end), and vLLM's `use_beam_search` (beam search of width
best_of, or n; the n best beams returned, as vLLM's server reads n as the width).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from perfkit.config.bounds import MAX_OUTPUTS
from perfkit.engine.sampling_params import SamplingParams
from perfkit.serve import fields
from perfkit.serve.bounds import sampling_problem, shown
from perfkit.serve.errors import ApiError, invalid
from perfkit.serve.prompts import parse_messages, parse_prompt, parse_prompts
from perfkit.serve.sampling import sampling_params
from perfkit.serve.structured import Structured, parse_structured

__all__ = ["ApiError", "GenerateRequest", "ModelInfo", "invalid", "parse_messages",
           "parse_prompt", "parse_request"]

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for completions; used for chat too


@dataclass(frozen=True)
class ModelInfo:
    name: str  # the one model id served (the profile's name)
    vocab_size: int
    # the profile's temperature and the server's EOS token, for fields a request leaves out
    defaults: SamplingParams = field(default_factory=SamplingParams)


@dataclass(frozen=True)
class Prompt:
    ids: tuple[int, ...]  # token ids
    text: str  # as given (a string prompt), or its ids as words "t5 t6" (echo)


@dataclass(frozen=True)
class GenerateRequest:
    chat: bool  # /v1/chat/completions (else /v1/completions)
    prompts: tuple[Prompt, ...]  # one choice each, in order (a batch: completions only)
    max_tokens: int  # requested output tokens (the engine also stops at max_model_len)
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with usage
    continuous_usage: bool = False  # stream_options.continuous_usage_stats: in every chunk
    echo: bool = False  # completions: the prompt's text (and logprobs) before the output
    priority: int = 0  # vLLM's extension: lower runs first
    tool_call: bool = False  # perfkit's extension: output is a guarded tool call
    # sampling, stop, logprobs, and the grammar of `structured`
    params: SamplingParams = field(default_factory=lambda: SamplingParams(output_text=True))
    structured: Structured | None = None  # tools / response_format through the guard
    ignored: tuple[str, ...] = ()  # fields given a value that changes nothing here
    n: int = 1  # choices returned per prompt
    best_of: int = 1  # outputs generated per prompt (>= n): the n most likely returned
    beam_search: bool = False  # vLLM's use_beam_search: best_of beams, the n best returned

    @property
    def prompt(self) -> tuple[int, ...]:
        """The first prompt's ids (the only one but in a batched completion)."""
        return self.prompts[0].ids


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_fields(body: dict[str, Any], chat: bool) -> None:
    allowed = fields.allowed_fields(chat)
    for key in body:
        if key not in allowed:
            raise invalid(key, "unknown field (not supported by perfkit serve)", "unknown_field")
    for key, value in body.items():
        types = fields.types_of(key, chat)
        if value is not None and (not isinstance(value, types) or
                                  (isinstance(value, bool) and bool not in types)):
            raise invalid(key, f"expected {' or '.join(t.__name__ for t in types)}, "
                          f"got {shown(value)}")
    for key, (honoured, why) in fields.NEUTRAL_ONLY.items():
        if key in allowed and body.get(key) is not None and body[key] not in honoured:
            raise invalid(key, why, "unsupported_value")


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


def _outputs(body: dict[str, Any], stream: bool) -> tuple[int, int, bool]:
    """(n, best_of, beam search): n >= 1, best_of >= n (default n), at most MAX_OUTPUTS;
    best_of > n does not stream (the best are known only at the end)."""
    n = _int_field(body, "n", 1, 1)
    best_of = _int_field(body, "best_of", n, n)
    for key, value in (("n", n), ("best_of", best_of)):
        if value > MAX_OUTPUTS:
            raise invalid(key, f"must be at most {MAX_OUTPUTS}, got {value}")
    if stream and best_of > n:
        raise invalid("best_of", f"best_of ({best_of}) > n ({n}) cannot stream: the best "
                      "n are known only when every output has ended; set stream false",
                      "unsupported_value")
    return n, best_of, _bool_field(body, "use_beam_search")


def _stream_options(body: dict[str, Any], stream: bool) -> tuple[bool, bool]:
    """(include_usage, continuous_usage_stats); vLLM sends usage in every chunk only when
    both are true."""
    options = body.get("stream_options")
    if options is None:
        return False, False
    if not stream:
        raise invalid("stream_options", "only allowed when stream is true")
    unknown = set(options) - {"include_usage", "continuous_usage_stats"}
    if unknown:
        raise invalid(f"stream_options.{sorted(unknown)[0]}", "unknown option (expected "
                      "include_usage, continuous_usage_stats)", "unknown_field")
    usage = _bool_field(options, "include_usage")
    return usage, usage and _bool_field(options, "continuous_usage_stats")


def _prompts(body: dict[str, Any], vocab_size: int, chat: bool) -> tuple[Prompt, ...]:
    prompts: list[tuple[list[int], str | None]]
    if chat:
        prompts = [(parse_messages(body.get("messages"), vocab_size), None)]
    else:
        prompts = parse_prompts(body.get("prompt"), vocab_size)
    keep = body.get("truncate_prompt_tokens")  # vLLM: keep the last N tokens
    if keep is not None and keep > 0:
        prompts = [(ids[-keep:], None if len(ids) > keep else text) for ids, text in prompts]
    return tuple(Prompt(tuple(ids), text if text is not None else
                        " ".join(f"t{t}" for t in ids)) for ids, text in prompts)


def parse_request(body: Any, model: ModelInfo, chat: bool) -> GenerateRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    _check_fields(body, chat)
    if (problem := sampling_problem(body)) is not None:
        raise invalid(*problem)
    _check_model(body, model)
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None \
        else "max_tokens"
    max_tokens = _int_field(body, key, DEFAULT_MAX_TOKENS, 1)
    stream = _bool_field(body, "stream")
    usage, continuous = _stream_options(body, stream)
    n, best_of, beam = _outputs(body, stream)
    echo = not chat and _bool_field(body, "echo")
    structured = parse_structured(body, chat, model.vocab_size)
    tool_call = _bool_field(body, "tool_call")
    if tool_call and structured is not None:
        raise invalid("tool_call", "cannot be combined with tools or response_format")
    params = sampling_params(body, chat, model.defaults, model.vocab_size, max_tokens, echo)
    if structured is not None:
        params = dataclasses.replace(params, grammar=structured.grammar,
                                     grammar_optional=structured.optional)
    return GenerateRequest(
        chat=chat, prompts=_prompts(body, model.vocab_size, chat), max_tokens=max_tokens,
        stream=stream, include_usage=usage, continuous_usage=continuous, echo=echo,
        priority=_int_field(body, "priority", 0, None), tool_call=tool_call, params=params,
        structured=structured, ignored=fields.ignored_fields(body, chat), n=n,
        best_of=best_of, beam_search=beam,
    )
