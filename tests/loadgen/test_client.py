"""The remote client against a loopback stub: SSE parsing, records, every failure kind."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.errors import PerfkitError
from perfkit.loadgen.client import RemoteServe, Target, open_pool, request_body
from perfkit.loadgen.sse import SseParser, parse_chunk, usage_counts
from perfkit.remote.target import check_url, resolve_target
from perfkit.workload import RequestSpec

SPEC = RequestSpec(request_id=7, prompt=(5, 6, 7, 8), max_tokens=10)


def run(url: str, specs: list[RequestSpec], timeout_s: float = 5.0):
    async def go():
        target = Target(url, "m", None, timeout_s)
        async with open_pool(target, 2) as pool:
            serve = RemoteServe(pool, target, time.perf_counter())
            records = [await serve(spec, False) for spec in specs]
        return records, serve

    return asyncio.run(go())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sse_parser_events_comments_and_multiline():
    p = SseParser()
    lines = [b": keep-alive\n", b"data: {\"a\":\n", b"data: 1}\r\n", b"\n", b"event: x\n",
             b"data: [DONE]"]
    assert [p.feed(line) for line in lines] == [[], [], [], [b'{"a":\n1}'], [], []]
    assert p.close() == b"[DONE]" and p.close() is None


STREAM = (b": ping\r\n\r\ndata: one\r\n\r\ndata: two\n\ndata: th\ndata: ree\r\rdata: four\n\n"
          b"event: x\ndata: five\n\n")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 13, len(STREAM)])
def test_sse_parser_any_split_gives_the_same_events(size):
    """However the bytes are cut into reads (a CRLF or a blank line across two), the
    events are the same, in order."""
    p = SseParser()
    events = [e for i in range(0, len(STREAM), size) for e in p.feed(STREAM[i:i + size])]
    assert events == [b"one", b"two", b"th\nree", b"four", b"five"] and p.close() is None


def test_sse_parser_reads_one_megabyte_event_whole():
    """No read-buffer or line limit: a 1 MB data line in 64 KiB reads is one event."""
    big = b"data: " + b"x" * 2**20 + b"\n\ndata: [DONE]\n\n"
    p = SseParser()
    events = [e for i in range(0, len(big), 65536) for e in p.feed(big[i:i + 65536])]
    assert [len(e) for e in events] == [2**20, 6]


def test_parse_chunk_kinds():
    token = parse_chunk('{"choices": [{"text": "a", "finish_reason": null}]}')
    assert token.has_token and token.finish_reason is None
    last = parse_chunk('{"choices": [{"text": "", "finish_reason": "length"}]}')
    assert not last.has_token and last.finish_reason == "length"
    empty_token = parse_chunk('{"choices": [{"text": "", "finish_reason": null}]}')
    assert empty_token.has_token
    usage = parse_chunk('{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 9,'
                        ' "prompt_tokens_details": {"cached_tokens": 2}}}')
    assert not usage.has_token and usage_counts(usage.usage) == (4, 9, 2)
    assert parse_chunk('{"error": {"message": "boom"}}').error == "boom"
    assert parse_chunk('{"choices": [{"delta": {"content": "hi"}}]}').has_token
    with pytest.raises(ValueError):
        parse_chunk("[1, 2]")
    for odd in ('{"choices": 5}', '{"choices": [{"delta": "x", "finish_reason": 3}]}',
                '{"choices": [7], "usage": [1]}', '{"usage": {"prompt_tokens_details": 1}}'):
        chunk = parse_chunk(odd)  # malformed fields count as absent
        assert chunk.error is None and usage_counts(chunk.usage)[2] is None


def test_request_body_sends_token_ids_and_extensions():
    body = request_body(RequestSpec(0, (1, 2), 3, priority=2, tool_call=True), "m")
    assert body["prompt"] == [1, 2] and body["max_tokens"] == 3 and body["stream"] is True
    assert body["ignore_eos"] is True and body["stream_options"] == {"include_usage": True}
    assert body["priority"] == 2 and body["tool_call"] is True
    assert "priority" not in request_body(SPEC, "m")


def test_streamed_record_one_token_per_chunk(stub):
    server = stub()
    [rec], serve = run(server.url, [SPEC])
    assert serve.errors == {}
    assert rec.output_tokens == 10 and len(rec.token_times_s) == 10
    assert rec.prompt_tokens == 3 and rec.cached_tokens == 2  # from usage
    assert rec.finish_reason == "length" and rec.completed
    assert rec.ttft_s is not None and rec.ttft_s > 0 and len(rec.itl_s) == 9
    assert rec.finish_s == rec.token_times_s[-1]
    assert server.cfg.bodies[0]["prompt"] == [5, 6, 7, 8]


def test_several_tokens_per_chunk_counted_from_usage(stub):
    [rec], _ = run(stub(tokens_per_chunk=4).url, [SPEC])
    assert rec.output_tokens == 10 and len(rec.token_times_s) == 3  # chunks: 4 + 4 + 2


def test_without_usage_tokens_are_chunks(stub):
    [rec], _ = run(stub(usage=False).url, [SPEC])
    assert rec.output_tokens == 10 and rec.prompt_tokens == 4 and rec.cached_tokens == 0


def test_429_is_a_rejection_with_retry_after(stub):
    [rec], serve = run(stub(status=429, retry_after="2").url, [SPEC])
    assert rec.rejected == "http 429" and rec.finish_reason == "rejected"
    assert rec.finish_s is None and not rec.completed
    assert serve.errors == {7: "http 429"} and serve.retry_after_s == [2.0]


def test_503_is_an_error(stub):
    [rec], serve = run(stub(status=503).url, [SPEC])
    assert rec.rejected is None and rec.finish_reason == "error" and not rec.completed
    assert serve.errors == {7: "http 503"}


def test_cut_stream_is_a_broken_stream(stub):
    [rec], serve = run(stub(cut_after_chunks=3).url, [SPEC])
    assert serve.errors == {7: "broken stream"} and rec.finish_reason == "error"
    assert rec.output_tokens == 3


def test_stall_beyond_timeout(stub):
    [rec], serve = run(stub(stall_s=1.0).url, [SPEC], timeout_s=0.2)
    assert serve.errors == {7: "timeout"} and rec.finish_reason == "error"


def test_abort_finish_reason_is_an_error(stub):
    [rec], serve = run(stub(finish_reason="abort").url, [SPEC])
    assert serve.errors == {7: "aborted"} and not rec.completed


def test_connection_refused():
    [rec], serve = run(f"http://127.0.0.1:{closed_port()}/v1", [SPEC])
    assert serve.errors == {7: "connection refused"} and rec.output_tokens == 0


def test_resolve_target_picks_the_first_model(stub):
    server = stub()
    assert resolve_target(server.url + "/", None, None, 5.0).model == "stub-model"
    assert resolve_target(server.url, "mine", None, 5.0).model == "mine"
    with pytest.raises(PerfkitError, match="/models: http 404; is the URL the API's base"):
        resolve_target(server.url.removesuffix("/v1"), None, None, 5.0)


def test_resolve_target_errors(monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(PerfkitError, match=f"cannot reach {url}: connection refused"):
        resolve_target(url, None, None, 5.0)
    monkeypatch.delenv("PERFKIT_TEST_KEY", raising=False)
    with pytest.raises(PerfkitError, match="PERFKIT_TEST_KEY is not set"):
        resolve_target(url, None, "PERFKIT_TEST_KEY", 5.0)
    for bad in ("localhost:8000", "ftp://x/v1", "http://:80/v1", "http://h:notaport/v1"):
        with pytest.raises(PerfkitError, match="--target: expected an http"):
            check_url(bad, "--target")


_TEXT = st.text(alphabet=st.sampled_from('ab "\\:{}[],nul\n\u00e9'), max_size=12)
_CHOICE = st.fixed_dictionaries(
    {"index": st.integers(0, 3)},
    optional={"text": _TEXT, "delta": st.fixed_dictionaries({}, optional={"content": _TEXT}),
              "finish_reason": st.one_of(st.none(), st.sampled_from(["length", "stop"]), _TEXT),
              "logprobs": st.none()})
_CHUNK = st.fixed_dictionaries(
    {"id": _TEXT, "choices": st.lists(_CHOICE, max_size=2)},
    optional={"usage": st.fixed_dictionaries({"prompt_tokens": st.integers(0, 9)}),
              "error": st.fixed_dictionaries({"message": _TEXT}), "note": _TEXT})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk=_CHUNK, spaced=st.booleans())
def test_token_fast_path_agrees_with_the_decoder(chunk, spaced):
    """parse_chunk on bytes (which may skip the JSON decoder for plain token chunks) gives
    what the decoder gives, whatever the texts hold (quotes, colons, the key's own name)."""
    text = json.dumps(chunk, separators=(", ", ": ") if spaced else (",", ":"))
    assert parse_chunk(text.encode()) == parse_chunk(text)


_TRICKY = st.lists(st.sampled_from(['"finish_reason":', '"usage"', '"error"', "null",
                                     '"length"', " ", "\\", "x", "}", "{"]),
                   max_size=6).map("".join)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TRICKY, other=_TRICKY, chat=st.booleans(), spaced=st.booleans(),
       extra=st.sampled_from([{}, {"usage": {"completion_tokens": 3}},
                              {"error": {"message": "x"}}, {"note": None}]),
       index=st.sampled_from([0, 1, 10]))
def test_token_chunks_whose_texts_mimic_the_keys(text, other, chat, spaced, extra, index):
    """The chunks the fast path takes (and near misses: usage or an error beside a null
    finish reason, another choice's index), with texts made of the very bytes it looks
    for."""
    choice = ({"index": index, "delta": {"content": text}} if chat
              else {"index": index, "text": text})
    chunk = {"id": other, "choices": [choice | {"finish_reason": None}], "note": other} | extra
    raw = json.dumps(chunk, separators=(", ", ": ") if spaced else (",", ":"))
    assert parse_chunk(raw.encode()) == parse_chunk(raw)


def test_several_choices_are_asked_for_and_parsed_by_index():
    body = request_body(RequestSpec(1, (3, 4), 5, n=3), "m")
    assert body["n"] == 3 and "use_beam_search" not in body
    beams = request_body(RequestSpec(1, (3, 4), 5, beam_width=4), "m")
    assert (beams["n"], beams["use_beam_search"]) == (4, True)
    for raw in ('{"choices": [{"index": 2, "text": "a", "finish_reason": null}]}',
                b'{"choices":[{"index":2,"text":"a","finish_reason":null}]}'):
        chunk = parse_chunk(raw)
        assert chunk.choice == 2 and chunk.has_token
    assert parse_chunk(b'{"choices":[{"index":0,"text":"a","finish_reason":null}]}').choice == 0
    assert parse_chunk('{"choices": [{"index": "x", "text": "a"}]}').choice == 0
