"""Several choices from perfkit serve: n samples sharing the prompt's blocks, best_of, and
vLLM's use_beam_search; usage counts every output."""

from __future__ import annotations

from typing import Any

import pytest
from serve_http import http, sse_events

from perfkit.serve.testing import running_server

MODEL = "default"


def completion(base_url: str, **body: Any) -> Any:
    reply = http(f"{base_url}/v1/completions", {"model": MODEL, **body})
    assert reply.status == 200, reply.body
    return reply.json()


@pytest.fixture(scope="module")
def random_url():
    """A server sampling at temperature 1 (the samples differ)."""
    with running_server("default", sets=("engine.cpu_threads=1",
                                         'engine.sampling="random"')) as url:
        yield url


def test_samples_differ_and_best_of_returns_the_likeliest(random_url: str) -> None:
    reply = completion(random_url, prompt=list(range(1, 30)), max_tokens=6, n=3)
    texts = [c["text"] for c in reply["choices"]]
    assert [c["index"] for c in reply["choices"]] == [0, 1, 2] and len(set(texts)) > 1
    assert reply["usage"]["completion_tokens"] == 18
    best = completion(random_url, prompt=list(range(1, 30)), max_tokens=6, n=1, best_of=4)
    assert len(best["choices"]) == 1 and best["usage"]["completion_tokens"] == 24


def test_beam_search_returns_its_beams_best_first(base_url: str) -> None:
    reply = completion(base_url, prompt=list(range(1, 30)), max_tokens=5, n=3,
                       use_beam_search=True)
    texts = [c["text"] for c in reply["choices"]]
    assert len(texts) == 3 and len(set(texts)) == 3  # distinct beams
    assert reply["usage"]["completion_tokens"] == 15
    events = sse_events(http(f"{base_url}/v1/completions", {
        "model": MODEL, "prompt": list(range(1, 30)), "max_tokens": 5, "n": 3,
        "use_beam_search": True, "stream": True}).body)
    streamed: dict[int, str] = {}
    for e in events[:-1]:
        for c in e["choices"]:
            streamed[c["index"]] = streamed.get(c["index"], "") + c["text"]
    assert [streamed[i] for i in range(3)] == texts  # the same beams, streamed at the end
