"""perfkit serve over real loopback HTTP: shapes, errors, overload, metrics, disconnects."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from typing import Any

import aiohttp
import pytest
from serve_http import SETS, http, parse_metrics, sse_events

from perfkit.engine.engine import Engine
from perfkit.serve.testing import running_server
from perfkit.serve.tokens import tokenize

MODEL = "default"


def completion(base_url: str, **body: Any) -> Any:
    reply = http(f"{base_url}/v1/completions", {"model": MODEL} | body)
    assert reply.status == 200, reply.body
    return reply.json()


def test_text_prompt_is_the_same_as_its_token_ids(base_url: str) -> None:
    by_text = completion(base_url, prompt="the quick brown fox", max_tokens=6)
    ids = tokenize("the quick brown fox", 512)
    by_ids = completion(base_url, prompt=ids, max_tokens=6)
    assert by_text["choices"][0]["text"] == by_ids["choices"][0]["text"]
    assert by_text["object"] == "text_completion"
    assert by_text["usage"] == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10,
                                "prompt_tokens_details": {"cached_tokens": 0}}
    words = by_text["choices"][0]["text"].split()
    assert len(words) == 6 and by_text["choices"][0]["finish_reason"] == "length"
    # generated words map back to the ids that produced them
    echo = completion(base_url, prompt=" ".join(words), max_tokens=1)
    assert echo["usage"]["prompt_tokens"] == 6
    assert tokenize(" ".join(words), 512) == [int(w[1:]) for w in words]


def test_stream_has_one_chunk_per_token_then_usage_and_done(base_url: str) -> None:
    reply = http(f"{base_url}/v1/completions", {
        "model": MODEL, "prompt": [5, 6, 7], "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}})
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(reply.body)
    assert events[-1] == "[DONE]"
    tokens, usage = events[:5], events[5]
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None] * 4 + ["length"]
    assert all(len(e["choices"][0]["text"].split()) == 1 for e in tokens)
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 5
    whole = completion(base_url, prompt=[5, 6, 7], max_tokens=5)
    assert "".join(e["choices"][0]["text"] for e in tokens) == whole["choices"][0]["text"]


def test_chat_stream_deltas(base_url: str) -> None:
    reply = http(f"{base_url}/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "hi there"}],
        "max_tokens": 3, "stream": True})
    events = sse_events(reply.body)
    assert events[-1] == "[DONE]" and len(events) == 4
    assert events[0]["object"] == "chat.completion.chunk"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[2]["choices"][0]["finish_reason"] == "length"


BAD = [
    (b"{not json", 400, "invalid_json"),
    ({"model": MODEL, "max_tokens": 4}, 400, "missing_field"),
    ({"model": MODEL, "prompt": "a", "max_tokens": 0}, 400, "invalid_value"),
    ({"model": MODEL, "prompt": "a", "max_tokens": "4"}, 400, "invalid_value"),
    ({"model": MODEL, "prompt": "a", "n": 0}, 400, "invalid_value"),
    ({"model": MODEL, "prompt": "a", "n": 3, "best_of": 2}, 400, "invalid_value"),
    ({"model": MODEL, "prompt": "a", "n": 2, "best_of": 3, "stream": True}, 400,
     "unsupported_value"),
    ({"model": MODEL, "prompt": "a", "n": 17}, 400, "too_many_outputs"),  # max_num_seqs 16
    ({"model": "gpt-4", "prompt": "a"}, 404, "model_not_found"),
    ({"model": MODEL, "prompt": "a", "bogus": 1}, 400, "unknown_field"),
    ({"model": MODEL, "prompt": [1, 512]}, 400, "invalid_value"),
    ({"model": MODEL, "prompt": ""}, 400, "invalid_value"),
    ({"model": MODEL, "prompt": "a", "stream_options": {"include_usage": True}}, 400,
     "invalid_value"),
    ({"model": MODEL, "prompt": [7] * 512}, 400, "prompt_too_long"),
    ([1, 2], 400, "invalid_json"),
]


@pytest.mark.parametrize(("body", "status", "code"), BAD)
def test_bad_requests_get_openai_errors(base_url: str, body: Any, status: int,
                                        code: str) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = http(f"{base_url}/v1/completions", raw=raw)
    assert reply.status == status
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code


def test_bad_chat_and_unknown_route(base_url: str) -> None:
    reply = http(f"{base_url}/v1/chat/completions", {"model": MODEL, "messages": []})
    assert reply.status == 400 and reply.json()["error"]["param"] == "messages"
    assert http(f"{base_url}/v1/embeddings", {}).status == 404


def test_health_models_and_metrics_move(base_url: str) -> None:
    assert http(f"{base_url}/health").status == 200
    assert [m["id"] for m in http(f"{base_url}/v1/models").json()["data"]] == [MODEL]
    before = parse_metrics(http(f"{base_url}/metrics").body.decode())
    completion(base_url, prompt=list(range(1, 41)), max_tokens=7)
    again = completion(base_url, prompt=list(range(1, 41)), max_tokens=7)  # 2 blocks cached
    assert again["usage"]["prompt_tokens_details"] == {"cached_tokens": 32}
    after = parse_metrics(http(f"{base_url}/metrics").body.decode())
    label = f'model_name="{MODEL}"'

    def delta(name: str) -> float:
        return after[(name, label)] - before[(name, label)]

    assert delta("vllm:prompt_tokens_total") == 80
    assert delta("vllm:generation_tokens_total") == 14
    assert delta("vllm:prefix_cache_queries_total") == 80
    assert delta("vllm:prefix_cache_hits_total") == 32
    assert after[("vllm:num_requests_running", label)] == 0
    assert after[("vllm:num_requests_waiting", label)] == 0
    assert 0 <= after[("vllm:kv_cache_usage_perc", label)] <= 1


async def _post_many(url: str, n: int, body: dict[str, Any]) -> list[tuple[int, Any, Any]]:
    async with aiohttp.ClientSession() as session:
        async def one() -> tuple[int, Any, Any]:
            async with session.post(url, json=body) as r:
                return r.status, r.headers.get("Retry-After"), await r.json()
        return await asyncio.gather(*(one() for _ in range(n)))


@pytest.mark.parametrize(("sets", "quota", "code"), [
    (("engine.max_waiting=2",), 0, "queue_full"),
    ((), 60, "token_quota_exceeded"),
])
def test_overload_gets_429_and_nothing_accepted_is_lost(sets: tuple[str, ...], quota: int,
                                                        code: str) -> None:
    body = {"model": MODEL, "prompt": list(range(1, 21)), "max_tokens": 12}
    with running_server("default", sets=(*SETS, *sets), max_queued_tokens=quota) as url:
        replies = asyncio.run(_post_many(f"{url}/v1/completions", 20, body))
        metrics = parse_metrics(http(f"{url}/metrics").body.decode())
    ok = [r for r in replies if r[0] == 200]
    limited = [r for r in replies if r[0] == 429]
    assert ok and limited and len(ok) + len(limited) == 20
    assert all(r[1] is not None and int(r[1]) >= 1 for r in limited)
    assert {r[2]["error"]["code"] for r in limited} == {code}
    assert all(r[2]["usage"]["completion_tokens"] == 12 for r in ok)
    assert all(len(r[2]["choices"][0]["text"].split()) == 12 for r in ok)
    label = f'model_name="{MODEL}",finished_reason="length"'
    assert metrics[("vllm:request_success_total", label)] == len(ok)


def _open(url: str, max_tokens: int, stream: bool = True) -> socket.socket:
    """A raw request on its own socket (to close it mid-request); a streaming one is
    returned after its first token arrived."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    body = json.dumps({"model": MODEL, "prompt": [1, 2, 3], "max_tokens": max_tokens,
                       "stream": stream}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                 b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    received = b""
    while stream and b"data: " not in received:
        data = sock.recv(65536)
        assert data, received
        received += data
    return sock


def _wait_for(url: str, name: str, labels: str, value: float) -> dict[tuple[str, str], float]:
    deadline = time.monotonic() + 10
    while True:
        metrics = parse_metrics(http(f"{url}/metrics").body.decode())
        if metrics.get((name, labels)) == value or time.monotonic() > deadline:
            return metrics
        time.sleep(0.05)


def test_client_disconnect_cancels_the_request(base_url: str) -> None:
    running = ("vllm:num_requests_running", f'model_name="{MODEL}"')
    _open(base_url, max_tokens=400).close()
    whole = _open(base_url, max_tokens=400, stream=False)
    _wait_for(base_url, *running, 1)
    whole.close()
    label = f'model_name="{MODEL}",finished_reason="abort"'
    metrics = _wait_for(base_url, "vllm:request_success_total", label, 2)
    assert metrics[("vllm:request_success_total", label)] == 2
    assert metrics[running] == 0


def test_drain_timeout_ends_streams_with_abort() -> None:
    chunks: list[bytes] = []
    with running_server("default", sets=SETS, drain_timeout_s=0.1) as url:
        sock = _open(url, max_tokens=480)

        def read_all() -> None:
            while data := sock.recv(65536):
                chunks.append(data)

        reader = threading.Thread(target=read_all)
        reader.start()
    reader.join(10)
    sock.close()
    tail = b"".join(chunks)
    assert b'"finish_reason":"abort"' in tail and b"data: [DONE]" in tail
    assert tail.endswith(b"0\r\n\r\n")  # the chunked body ended properly


def test_engine_failure_ends_streams_and_fails_health(monkeypatch: pytest.MonkeyPatch) -> None:
    step = Engine.step
    calls = itertools.count()

    def failing_step(self: Engine) -> list[Any]:
        if next(calls) == 3:
            raise RuntimeError("boom")
        return step(self)

    monkeypatch.setattr(Engine, "step", failing_step)
    with running_server("default", sets=SETS) as url:
        reply = http(f"{url}/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 9,
                                               "stream": True})
        events = sse_events(reply.body)
        assert [e["choices"][0]["finish_reason"] for e in events[:-1]][-1] == "abort"
        assert events[-1] == "[DONE]"
        assert http(f"{url}/health").status == 503
        again = http(f"{url}/v1/completions", {"model": MODEL, "prompt": "x"})
        assert again.status == 503 and "boom" in again.json()["error"]["message"]
