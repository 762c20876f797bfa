"""The load generator's HTTP/1.1 client (perfkit.loadgen.http) against canned responses:
chunked, Content-Length and read-until-close bodies cut at any byte, keep-alive reuse,
error statuses, timeouts, refusals and broken streams."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.loadgen.http import BrokenStream, Origin, Pool, _Conn


class Sink:
    def __init__(self, enough: bytes | None = None) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.data = b""
        self.reads = 0
        self.enough = enough

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers = status, headers

    def body(self, data: bytes, now: float) -> bool:
        self.data += data
        self.reads += 1
        return self.enough is not None and self.enough in self.data


def chunked(*parts: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n"
            + trailer + b"\r\n")


class FakeTransport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    abort = close


def feed(response: bytes, cuts: list[int], sink: Sink) -> tuple[_Conn, asyncio.Future[None]]:
    """Hand `response` to a connection in reads cut at `cuts`."""
    conn = _Conn()
    conn.connection_made(FakeTransport())  # type: ignore[arg-type]
    done = conn.start(b"POST / HTTP/1.1\r\n\r\n", sink)
    edges = [0, *sorted(set(c for c in cuts if 0 < c < len(response))), len(response)]
    for a, b in itertools.pairwise(edges):
        conn.data_received(response[a:b])
    return conn, done


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=6),
       trailer=st.sampled_from([b"", b"X-Checksum: 1\r\n"]), data=st.data())
def test_chunked_bodies_cut_anywhere_give_the_same_payload(parts, trailer, data):
    response = chunked(*parts, trailer=trailer)
    cuts = data.draw(st.lists(st.integers(1, len(response) - 1), max_size=8))

    async def go():
        sink = Sink()
        conn, done = feed(response, cuts, sink)
        assert done.done() and done.exception() is None
        assert sink.status == 200 and sink.data == b"".join(parts)
        assert not conn.closed  # the body ended: the connection can be reused

    asyncio.run(go())


def test_content_length_and_until_close_bodies():
    async def go():
        sink = Sink()
        _, done = feed(b"HTTP/1.1 429 Too Many\r\nRetry-After: 2\r\nContent-Length: 5\r\n\r\nno!!!",
                       [20, 40], sink)
        assert done.done() and sink.status == 429 and sink.headers["retry-after"] == "2"
        assert sink.data == b"no!!!"
        sink = Sink()
        conn, done = feed(b"HTTP/1.0 200 OK\r\n\r\ndata: x\n\n", [], sink)
        assert not done.done()  # no length, not chunked: read until the server closes
        conn.connection_lost(None)
        assert done.done() and done.exception() is None and sink.data == b"data: x\n\n"

    asyncio.run(go())


def test_a_sink_that_has_enough_spends_the_connection_unless_the_body_ended():
    async def go():
        sink = Sink(enough=b"[DONE]")
        conn, done = feed(chunked(b"data: 1\n\n", b"data: [DONE]\n\n")[:-5], [], sink)
        assert done.done() and conn.closed  # the terminator never came: not reused
        sink = Sink(enough=b"[DONE]")
        conn, done = feed(chunked(b"data: 1\n\n", b"data: [DONE]\n\n"), [], sink)
        assert done.done() and not conn.closed

    asyncio.run(go())


@pytest.mark.parametrize("response", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # not a size
    b"HTTP/1.1 OK\r\n\r\n",  # no status code
])
def test_bad_framing_is_a_broken_stream(response):
    async def go():
        _, done = feed(response, [], Sink())
        assert isinstance(done.exception(), BrokenStream)

    asyncio.run(go())


def test_a_connection_closed_mid_body_is_a_broken_stream():
    async def go():
        conn, done = feed(chunked(b"data: 1\n\n")[:-7], [], Sink())
        conn.connection_lost(None)
        assert isinstance(done.exception(), BrokenStream)

    asyncio.run(go())


async def serve(handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object]):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n")
                      if ln.lower().startswith(b"content-length")))
    return head + await reader.readexactly(length)


def test_keep_alive_reuses_one_connection_and_sends_the_headers():
    seen: list[bytes] = []
    connections = []

    async def handler(reader, writer):
        connections.append(writer)
        for _ in range(3):
            seen.append(await read_request(reader))
            writer.write(chunked(b"data: ok\n\n"))
            await writer.drain()

    async def go():
        server, port = await serve(handler)
        async with Pool(Origin.parse(f"http://127.0.0.1:{port}/v1"), 1, 5.0) as pool:
            for _ in range(3):
                sink = Sink()
                await pool.post("/v1/completions", {"Content-Type": "application/json",
                                                    "traceparent": "00-ab-cd-01"}, b"{}", sink)
                assert sink.status == 200 and sink.data == b"data: ok\n\n"
        server.close()

    asyncio.run(go())
    assert len(connections) == 1 and len(seen) == 3
    first = seen[0].decode()
    assert first.startswith("POST /v1/completions HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{connections[0].get_extra_info('sockname')[1]}" in first
    assert "traceparent: 00-ab-cd-01" in first and first.endswith("\r\n\r\n{}")


def test_silence_is_a_timeout_and_a_closed_port_is_refused():
    async def handler(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await asyncio.sleep(5)

    async def go():
        server, port = await serve(handler)
        async with Pool(Origin.parse(f"http://127.0.0.1:{port}"), 2, 0.2) as pool:
            with pytest.raises(TimeoutError):
                await pool.post("/x", {}, b"", Sink())
        server.close()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        async with Pool(Origin.parse(f"http://127.0.0.1:{closed}"), 2, 1.0) as pool:
            with pytest.raises(ConnectionRefusedError):
                await pool.post("/x", {}, b"", Sink())

    asyncio.run(go())


def test_origin_and_host_header():
    assert Origin.parse("https://example.com/v1/").host_header == "example.com"
    o = Origin.parse("http://[::1]:8000/v1")
    assert (o.host, o.port, o.path, o.host_header) == ("::1", 8000, "/v1", "[::1]:8000")
