"""Every parameter the `openai` client sends, streaming and not, applied by perfkit serve:
sampling and seeds, stop, logprobs, echo, batched prompts, continuous usage, tools with
each tool_choice (tool calls validate against their schemas, streamed as deltas), and
response_format."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import jsonschema
import openai
import pytest

from perfkit.engine.guard.structured import STRUCTURED_TEXTS, StructuredVocab

MODEL = "default"
WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "minLength": 1, "maxLength": 10},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14}},
    "required": ["city", "unit"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 12},
                                           "limit": {"type": "integer", "maximum": 50}},
          "required": ["query"]}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "search", "description": "web",
                                      "parameters": SEARCH}},
]
SCHEMAS = {"get_weather": WEATHER, "search": SEARCH}
MESSAGES: list[Any] = [{"role": "user", "content": "what is the weather in lima"}]


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=60)


def text_of(client: openai.OpenAI, **kw: Any) -> tuple[str, Any]:
    done = client.completions.create(model=MODEL, prompt="t5 t6 t7 t8", **kw)
    return done.choices[0].text, done.choices[0]


def streamed_text(client: openai.OpenAI, **kw: Any) -> tuple[str, list[Any]]:
    chunks = list(client.completions.create(model=MODEL, prompt="t5 t6 t7 t8", stream=True,
                                            **kw))
    return "".join(c.choices[0].text for c in chunks if c.choices), chunks


def validate_calls(calls: Any) -> None:
    assert calls
    for call in calls:
        assert call.type == "function" and call.id
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


# -- sampling ------------------------------------------------------------------------------
def test_seeded_sampling_repeats_and_every_parameter_applies(client: openai.OpenAI) -> None:
    kw = {"max_tokens": 12, "temperature": 1.0, "top_p": 0.9, "seed": 42,
          "presence_penalty": 0.5, "frequency_penalty": 0.5,
          "extra_body": {"top_k": 40, "min_p": 0.01, "repetition_penalty": 1.2}}
    a, _ = text_of(client, **kw)
    b, _ = streamed_text(client, **kw)
    assert a == b  # same seed, same tokens, streamed or not
    assert text_of(client, **{**kw, "seed": 43})[0] != a
    forced, _ = text_of(client, max_tokens=4, logit_bias={"77": 100})
    assert forced.split() == ["t77"] * 4
    greedy, _ = text_of(client, max_tokens=6)
    assert text_of(client, max_tokens=6, temperature=0)[0] == greedy  # greedy by default


def test_stop_strings_cut_where_the_plain_request_says(client: openai.OpenAI) -> None:
    plain, _ = text_of(client, max_tokens=24)
    stop = plain[len(plain) // 2:len(plain) // 2 + 5]
    cut, choice = text_of(client, max_tokens=24, stop=[stop])
    assert cut == plain[:plain.find(stop)] and choice.finish_reason == "stop"
    assert choice.model_extra["stop_reason"] == stop
    streamed, chunks = streamed_text(client, max_tokens=24, stop=stop)
    assert streamed == cut and chunks[-1].choices[0].finish_reason == "stop"
    token = int(plain.split()[5][1:])
    ended, choice = text_of(client, max_tokens=24, extra_body={"stop_token_ids": [token]})
    assert ended == plain[:plain.find(f" t{token}")] and choice.model_extra["stop_reason"] \
        == token
    late, _ = text_of(client, max_tokens=24, extra_body={"stop_token_ids": [token],
                                                         "min_tokens": 12, "ignore_eos": True})
    assert f"t{token}" not in late.split()[:12]


# -- logprobs ------------------------------------------------------------------------------
def test_completion_logprobs_and_echo(client: openai.OpenAI) -> None:
    _, choice = text_of(client, max_tokens=3, logprobs=2)
    lp = choice.logprobs
    assert len(lp.tokens) == 3 and lp.tokens[0] == choice.text[:len(lp.tokens[0])]
    assert all(v <= 0 for v in lp.token_logprobs) and lp.text_offset[0] == 0
    assert all(2 <= len(top) <= 3 and max(top.values()) <= 0 for top in lp.top_logprobs)
    _, chunks = streamed_text(client, max_tokens=3, logprobs=1)
    assert [c.choices[0].logprobs.tokens[0] for c in chunks if c.choices] == lp.tokens
    echo = client.completions.create(model=MODEL, prompt="t5 t6 t7", max_tokens=2, echo=True,
                                     logprobs=1).choices[0]
    assert echo.text.startswith("t5 t6 t7 t")
    assert echo.logprobs.tokens[:3] == [" t5", " t6", " t7"] and len(echo.logprobs.tokens) == 5
    assert echo.logprobs.token_logprobs[0] is None and echo.logprobs.token_logprobs[1] < 0
    assert len(echo.model_extra["prompt_logprobs"]) == 3


def test_chat_logprobs_streaming_and_not(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3,
                                           logprobs=True, top_logprobs=3)
    content = whole.choices[0].logprobs.content
    assert len(content) == 3 and all(len(c.top_logprobs) == 3 for c in content)
    assert "".join(c.token for c in content) == whole.choices[0].message.content
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3,
                                            logprobs=True, stream=True)
    got = [c.choices[0].logprobs.content[0].token for c in stream if c.choices]
    assert got == [c.token for c in content]


# -- prompts and usage ---------------------------------------------------------------------
def test_batched_prompts_are_one_choice_each_in_order(client: openai.OpenAI) -> None:
    prompts = ["t5 t6", "t9 t10 t11", [3, 1, 4]]
    singles = [client.completions.create(model=MODEL, prompt=p, max_tokens=4).choices[0].text
               for p in prompts]
    batch = client.completions.create(model=MODEL, prompt=prompts, max_tokens=4)
    assert [c.index for c in batch.choices] == [0, 1, 2]
    assert [c.text for c in batch.choices] == singles
    assert batch.usage is not None and batch.usage.prompt_tokens == 8
    chunks = list(client.completions.create(model=MODEL, prompt=prompts, max_tokens=4,
                                            stream=True, stream_options={"include_usage": True}))
    for i, single in enumerate(singles):
        assert "".join(c.choices[0].text for c in chunks
                       if c.choices and c.choices[0].index == i) == single
    assert chunks[-1].usage.completion_tokens == 12


def test_continuous_usage_is_in_every_chunk(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=4, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True}))
    counts = [c.usage.completion_tokens for c in chunks if c.choices]
    assert counts == [1, 2, 3, 4] and chunks[-1].usage.completion_tokens == 4


# -- tools and JSON ------------------------------------------------------------------------
def test_required_tool_calls_validate_100_of_100_at_temperature_1(base_url: str) -> None:
    """The done-when figure. aiohttp sends them (100 at once): the openai client's own
    parsing in this process would triple the time; the shape is the openai client's in
    the other tests."""
    body = {"model": MODEL, "messages": MESSAGES, "tools": TOOLS, "tool_choice": "required",
            "temperature": 1.0, "max_tokens": 64}

    async def all_of() -> list[Any]:
        async with aiohttp.ClientSession() as session:
            async def one(seed: int) -> Any:
                url = f"{base_url}/v1/chat/completions"
                async with session.post(url, json=body | {"seed": seed}) as reply:
                    assert reply.status == 200
                    return await reply.json()
            return await asyncio.gather(*(one(seed) for seed in range(100)))

    calls = [call for reply in asyncio.run(all_of())
             for call in reply["choices"][0]["message"]["tool_calls"]]
    assert len(calls) >= 100
    for call in calls:
        fn = call["function"]
        jsonschema.validate(json.loads(fn["arguments"]), SCHEMAS[fn["name"]])
    assert len({c["function"]["arguments"] for c in calls}) > 50  # sampled, not one repeated


def test_tool_calls_stream_as_deltas(client: openai.OpenAI) -> None:
    for choice in ("required", {"type": "function", "function": {"name": "search"}}):
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, tools=TOOLS, tool_choice=choice, temperature=1.0,
            seed=5, max_tokens=64, stream=True)
        calls: dict[int, dict[str, str]] = {}
        finish = None
        for c in stream:
            delta = c.choices[0].delta
            assert not delta.content
            for d in delta.tool_calls or []:
                call = calls.setdefault(d.index, {"name": "", "arguments": ""})
                call["name"] += d.function.name or ""
                call["arguments"] += d.function.arguments or ""
            finish = c.choices[0].finish_reason or finish
        assert calls and finish == "stop"
        for call in calls.values():
            jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])
        if isinstance(choice, dict):
            assert [c["name"] for c in calls.values()] == ["search"]


def test_tool_choice_auto_none_and_named(client: openai.OpenAI) -> None:
    text = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS,
                                          max_tokens=5).choices[0]
    assert text.message.tool_calls is None and text.message.content  # greedy chose text
    bracket = StructuredVocab(512).first_id + STRUCTURED_TEXTS.index("[")  # a call's start
    called = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, tool_choice="auto", max_tokens=64,
        temperature=1.0, seed=1, logit_bias={str(bracket): 100}).choices[0]
    assert called.finish_reason == "tool_calls"
    validate_calls(called.message.tool_calls)
    none = client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS,
                                          tool_choice="none", max_tokens=5).choices[0]
    plain = client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                           max_tokens=5).choices[0]
    assert none.message.content == plain.message.content  # tools only described
    # auto: the first token chooses; a grammar id there would start a call, so text
    # starts below the grammar's ids (after it, text is free)
    assert int(text.message.content.split()[0][1:]) < StructuredVocab(512).first_id
    named = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=TOOLS, max_tokens=64, temperature=1.0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}).choices[0]
    assert [c.function.name for c in named.message.tool_calls] == ["get_weather"]
    validate_calls(named.message.tool_calls)


def test_response_format_json_object_and_schema(client: openai.OpenAI) -> None:
    for fmt, schema in (({"type": "json_object"}, {"type": "object"}),
                        ({"type": "json_schema", "json_schema": {"name": "w",
                                                                 "schema": WEATHER}}, WEATHER)):
        for stream in (False, True):
            kw: dict[str, Any] = dict(model=MODEL, messages=MESSAGES, max_tokens=80,
                                      temperature=1.0, seed=3, response_format=fmt)
            if stream:
                text = "".join(c.choices[0].delta.content or "" for c in
                               client.chat.completions.create(stream=True, **kw))
            else:
                text = client.chat.completions.create(**kw).choices[0].message.content
            jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize(("kw", "param"), [
    ({"n": 2, "extra_body": {"best_of": 1}}, "best_of"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"stop": ["ok", ""]}, "stop[1]"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "pattern": "a+"}}}}}],
      "tool_choice": "required"}, "tools[0].function.parameters.properties.x.pattern"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "array", "uniqueItems": True}}}}, "response_format.json_schema.schema."
     "uniqueItems"),
    ({"logit_bias": {"99999": 1}}, "logit_bias['99999']"),
    ({"max_tokens": 4, "extra_body": {"min_tokens": 5}}, "min_tokens"),
])
def test_values_perfkit_cannot_honour_are_a_400_naming_the_field(
        client: openai.OpenAI, kw: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, **kw)
    assert err.value.body["param"] == param  # type: ignore[index]
