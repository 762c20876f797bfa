"""Hostile input to perfkit serve: every refusal is OpenAI error JSON with a 4xx status
that names the problem, and the server logs no traceback.

Requests aiohttp's parser refuses (a URL or header too long) go over raw sockets: the
HTTP clients would not send them.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from serve_http import Reply, http

from perfkit.serve.bounds import MAX_BODY_BYTES, MAX_DEPTH, MAX_FIELD_BYTES, MAX_LINE_BYTES

MODEL = "default"
MAX_MODEL_LEN = 512  # the default profile's


@pytest.fixture(autouse=True)
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The server (its thread logs to the root logger too) logs no exception."""
    caplog.set_level(logging.DEBUG)
    yield
    bad = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not bad, [r.getMessage() for r in bad]


def raw(base_url: str, head: bytes, body: bytes = b"") -> Reply:
    """Send bytes as they are on a fresh connection; read the reply until it closes."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + body)
        received = b""
        while data := sock.recv(65536):
            received += data
    top, _, payload = received.partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return Reply(int(status_line.split()[1]), headers, payload)


def expect_error(reply: Reply, status: int, code: str, words: str) -> dict[str, Any]:
    assert reply.status == status, reply.body[:300]
    assert reply.headers["Content-Type"].startswith("application/json")
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and words in error["message"], error
    return dict(error)


def post(base_url: str, route: str = "/v1/completions", **body: Any) -> Reply:
    return http(f"{base_url}{route}", {"model": MODEL} | body)


# -- nesting -------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
@pytest.mark.parametrize("route", ["/v1/completions", "/v1/chat/completions", "/tokenize"])
def test_deep_nesting_is_a_400_not_a_recursion_error(base_url: str, depth: int,
                                                     route: str) -> None:
    body = b'{"model": "default", "prompt": ' + b"[" * depth + b"]" * depth + b"}"
    reply = http(f"{base_url}{route}", raw=body)
    expect_error(reply, 400, "too_deeply_nested", f"more than {MAX_DEPTH} deep")


def test_nan_is_not_json(base_url: str) -> None:
    reply = http(f"{base_url}/v1/completions",
                 raw=b'{"model": "default", "prompt": "a", "temperature": NaN}')
    expect_error(reply, 400, "invalid_json", "NaN is not a JSON number")


# -- URL, headers, body size ---------------------------------------------------------------
def test_long_url_is_a_json_414(base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    path = b"/v1/models?" + b"a" * (MAX_LINE_BYTES + 100)
    reply = raw(base_url, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    expect_error(reply, 414, "uri_too_long", f"longer than {MAX_LINE_BYTES} bytes")
    assert "refused a request" in caplog.text  # one line: the server's log is watched


def test_long_header_is_a_json_431(base_url: str) -> None:
    big = b"b" * (MAX_FIELD_BYTES + 100)
    reply = raw(base_url, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + big + b"\r\n\r\n")
    expect_error(reply, 431, "header_too_large", f"longer than {MAX_FIELD_BYTES} bytes")


def test_body_over_the_limit_is_a_json_413_before_it_is_read(base_url: str) -> None:
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(MAX_BODY_BYTES + 1).encode() +
            b"\r\n\r\n")
    reply = raw(base_url, head, b'{"model": "default", "prompt": "')
    expect_error(reply, 413, "request_too_large", f"larger than {MAX_BODY_BYTES} bytes")


# -- values ----------------------------------------------------------------------------------
def test_max_tokens_beyond_the_model_length_is_a_400(base_url: str) -> None:
    prompt = list(range(1, 501))
    room = MAX_MODEL_LEN - len(prompt)
    error = expect_error(post(base_url, prompt=prompt, max_tokens=10**9), 400,
                         "context_length_exceeded", f"maximum context length is {MAX_MODEL_LEN}")
    assert error["param"] == "max_tokens" and f"at most {room}" in error["message"]
    expect_error(post(base_url, prompt=prompt, max_tokens=room + 1), 400,
                 "context_length_exceeded", "max_tokens")
    whole = post(base_url, prompt=prompt, max_tokens=room)  # exactly to the end: served
    assert whole.status == 200 and whole.json()["usage"]["completion_tokens"] == room


@pytest.mark.parametrize(("field", "value", "words"), [
    ("temperature", -1, "must be >= 0, got -1"),
    ("top_p", 0, "in (0, 1]"),
    ("top_p", 1.5, "in (0, 1]"),
    ("top_k", -2, "got -2"),
    ("presence_penalty", 3, "in [-2, 2]"),
    ("repetition_penalty", 0, "> 0"),
    ("seed", 2**70, "a 64-bit integer"),
])
@pytest.mark.parametrize("route", ["/v1/completions", "/v1/chat/completions"])
def test_sampling_values_out_of_range_are_a_400(base_url: str, route: str, field: str,
                                                value: float, words: str) -> None:
    body = {"prompt": "a"} if route == "/v1/completions" else {
        "messages": [{"role": "user", "content": "a"}]}
    error = expect_error(post(base_url, route, **body, **{field: value}), 400,
                         "invalid_value", words)
    assert error["param"] == field


def test_sampling_values_in_range_are_served(base_url: str) -> None:
    reply = post(base_url, prompt="a", max_tokens=1, temperature=0, top_p=1, top_k=-1,
                 repetition_penalty=1.1, seed=2**63)
    assert reply.status == 200, reply.body


@pytest.mark.parametrize(("prompt", "shown"), [
    ([1.5], "1.5"), ([True], "true"), ([1, 2, 3.0], "3.0"), ([[1.5]], "1.5"),
    ([{"id": 1}], '{"id": 1}'), ([None], "null")])
@pytest.mark.parametrize("route", ["/v1/completions", "/tokenize"])
def test_non_integer_token_ids_say_so(base_url: str, route: str, prompt: list[Any],
                                      shown: str) -> None:
    error = expect_error(post(base_url, route, prompt=prompt), 400, "invalid_type",
                         "token ids must be integers")
    assert error["message"].endswith(f"got {shown}") and error["param"].startswith("prompt[")


@pytest.mark.parametrize(("prompt", "kind"), [
    (5, "number 5"), (1.5, "number 1.5"), (True, "boolean true"), ({"text": "a"}, "object")])
def test_a_prompt_of_the_wrong_type_is_a_type_error(base_url: str, prompt: Any,
                                                    kind: str) -> None:
    error = expect_error(post(base_url, prompt=prompt), 400, "invalid_type",
                         f"expected a string or a list of token ids, got {kind}")
    assert error["param"] == "prompt"


def test_long_values_are_cut_in_messages(base_url: str) -> None:
    reply = post(base_url, prompt=[{"text": "x" * 10_000}])
    error = expect_error(reply, 400, "invalid_type", "token ids must be integers")
    assert len(error["message"]) < 120 and error["message"].endswith("...")
    batch = post(base_url, "/tokenize", prompt=["a", "b"])  # /tokenize takes one prompt
    expect_error(batch, 400, "unsupported_value", "a batch of prompts is not allowed here")
