"""The official `openai` client against perfkit serve: streams, whole responses, usage."""

from __future__ import annotations

import openai
import pytest

MODEL = "default"


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=30)


def test_stream_completion_with_usage(client: openai.OpenAI) -> None:
    stream = client.completions.create(model=MODEL, prompt="hello perfkit server", max_tokens=8,
                                       stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len(texts) == 8 and all(t.startswith(" t") for t in texts)
    assert chunks[-2].choices[0].finish_reason == "length"
    usage = chunks[-1].usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, 8, 11)


def test_stream_chat_with_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL, max_tokens=5, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices]
    assert len(deltas) == 5 and chunks[0].choices[0].delta.role == "assistant"
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 5
    # "<|system|> be brief <|user|> hi <|assistant|>"
    assert usage.prompt_tokens == 6


def test_whole_completion_and_chat(client: openai.OpenAI) -> None:
    done = client.completions.create(model=MODEL, prompt=[3, 1, 4, 1, 5], max_tokens=4,
                                     extra_body={"priority": 1, "ignore_eos": True})
    assert done.object == "text_completion" and done.choices[0].finish_reason == "length"
    assert done.usage is not None and done.usage.total_tokens == 9
    assert len(done.choices[0].text.split()) == 4
    chat = client.chat.completions.create(model=MODEL, max_tokens=3,
                                          messages=[{"role": "user", "content": "x y"}])
    assert chat.choices[0].message.role == "assistant"
    assert chat.choices[0].message.content is not None
    assert len(chat.choices[0].message.content.split()) == 3
    assert chat.usage is not None and chat.usage.completion_tokens == 3


def test_errors_raise_the_clients_exceptions(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="a")
    with pytest.raises(openai.BadRequestError, match="best_of"):
        client.completions.create(model=MODEL, prompt="a", n=2, best_of=1)
    assert [m.id for m in client.models.list()] == [MODEL]


def test_n2_returns_two_choices(client: openai.OpenAI) -> None:
    done = client.completions.create(model=MODEL, prompt="a few words", max_tokens=4, n=2)
    assert [c.index for c in done.choices] == [0, 1]
    assert all(c.finish_reason == "length" and len(c.text.split()) == 4 for c in done.choices)
    assert done.usage is not None and done.usage.completion_tokens == 2 * 4
    chat = client.chat.completions.create(model=MODEL, max_tokens=3, n=2,
                                          messages=[{"role": "user", "content": "x y"}])
    assert [c.index for c in chat.choices] == [0, 1]
    assert chat.usage is not None and chat.usage.completion_tokens == 6


def test_n2_streams_each_choice_with_its_index(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL, max_tokens=3, n=2, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi"}])
    chunks = list(stream)
    by_index: dict[int, list] = {0: [], 1: []}
    for c in chunks:
        for choice in c.choices:
            by_index[choice.index].append(choice)
    for choices in by_index.values():
        assert len(choices) == 3 and choices[0].delta.role == "assistant"
        assert choices[-1].finish_reason == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
