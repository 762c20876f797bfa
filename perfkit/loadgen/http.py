"""A minimal HTTP/1.1 client for the load generator's one job: POST a JSON body and read a
streamed response as it arrives, on keep-alive connections.

Why not aiohttp here (it still does every other HTTP call in perfkit): its streaming reader
wakes a coroutine per chunk and re-arms a read timer per read. Against a server streaming a
token every 10 ms to 256 clients (two worker processes, on the server's own two cores),
perfkit's client on aiohttp spent 24.5 µs of CPU per chunk and read TTFT p50 33-35 ms for a
server that answers in 20; on this one, which hands each read's body bytes to the stream
parser inside the protocol callback, 15.5-17.9 µs and 30 ms (2026-12-03, perfkit bench's
server; docs/guides/load-generation.md has the commands).

    origin = Origin.parse("http://127.0.0.1:8000/v1")
    async with Pool(origin, limit=64, timeout_s=60) as pool:
        await pool.post("/v1/completions", headers, body, sink)

`sink.head(status, headers)` gets the response's status line and headers (names lower
case); `sink.body(data, now)` gets every read's body bytes (chunked transfer coding
removed) with one perf_counter stamp per read, and returns True when it has all it wants
(the connection is then reused only if the response also ended). `post` returns when the
response ended; it raises ConnectionRefusedError / OSError (connect), TimeoutError (no byte
for timeout_s), or BrokenStream (the connection closed or the framing broke mid-response).
Chunked, Content-Length and read-until-close bodies; https through the ssl module; no
proxies, no redirects, no compression (none is asked for).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol
from urllib.parse import urlsplit

from perfkit import __version__

MAX_HEAD = 64 * 1024  # a response head (or chunked trailers) longer than this is broken
SIZE_LINE, TRAILERS = -1, -2  # _Conn.left while a chunk-size line / the trailers are due


class BrokenStream(ConnectionError):
    """The connection closed, or the response's framing broke, before the response ended."""


class Sink(Protocol):
    def head(self, status: int, headers: dict[str, str]) -> None: ...
    def body(self, data: bytes, now: float) -> bool: ...


@dataclass(frozen=True)
class Origin:
    scheme: str  # http or https
    host: str
    port: int
    path: str  # the URL's path, without a trailing slash ("/v1")

    @classmethod
    def parse(cls, url: str) -> Origin:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname or "", port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def request_bytes(origin: Origin, path: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {origin.host_header}",
             f"User-Agent: perfkit/{__version__}", "Accept: */*",
             f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Conn(asyncio.Protocol):
    """One keep-alive connection: one request at a time.

    Body framing, per response: `left` is the bytes still due in the current chunk and
    its CRLF (chunked) or in the body (Content-Length); SIZE_LINE while a chunk-size line
    is due, TRAILERS after the last chunk; None reads until the server closes. A chunked
    body has ended when `chunked` is False and `left` is 0."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.sink: Sink | None = None
        self.done: asyncio.Future[None] | None = None
        self.in_body = False
        self.chunked = False
        self.left: int | None = 0
        self.keep = False  # the response allows the connection to be reused
        self.wanted = False  # the sink has all it wants
        self.last_rx = 0.0
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is not None and not self.done.done():
            if not self.in_body or self.left is not None:
                self.done.set_exception(BrokenStream("the connection closed mid-response"))
            else:
                self.done.set_result(None)  # a body read until the server closed

    def start(self, data: bytes, sink: Sink) -> asyncio.Future[None]:
        assert self.transport is not None
        self.sink, self.buf, self.in_body, self.wanted = sink, b"", False, False
        self.done = asyncio.get_running_loop().create_future()
        self.last_rx = time.perf_counter()
        self.transport.write(data)
        return self.done

    def data_received(self, data: bytes) -> None:
        now = self.last_rx = time.perf_counter()
        if self.done is None or self.done.done():
            self.closed = True  # bytes nobody asked for: the connection is not reused
            return
        try:
            self._take(self.buf + data if self.buf else data, now)
        except (ValueError, IndexError) as err:
            self._fail(BrokenStream(f"bad response framing ({err})"))

    def _take(self, data: bytes, now: float) -> None:
        if not self.in_body:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                if len(data) > MAX_HEAD:
                    raise ValueError("response head too long")
                self.buf = data
                return
            self._head(data[:end].decode("latin-1"))
            data = data[end + 4:]
        payload, self.buf = self._body(data)
        sink = self.sink
        assert sink is not None
        if payload and not self.wanted:
            self.wanted = sink.body(payload, now)
        if self.left == 0 and not self.chunked:  # the body ended
            self._end(reusable=self.keep)
        elif self.wanted and self.done is not None and not self.done.done():
            self._end(reusable=False)  # the rest is not read: this connection is spent

    def _head(self, head: str) -> None:
        status_line, *lines = head.split("\r\n")
        version, status, *_ = status_line.split(" ", 2)
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.in_body = True
        conn = headers.get("connection", "").lower()
        self.keep = (version == "HTTP/1.1" and conn != "close") or conn == "keep-alive"
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        if self.chunked:
            self.left = SIZE_LINE
        elif length is not None:
            self.left = int(length)
        else:
            self.left, self.keep = None, False  # until the server closes
        assert self.sink is not None
        self.sink.head(int(status), headers)

    def _body(self, data: bytes) -> tuple[bytes, bytes]:
        """(this read's payload, bytes kept for the next read)."""
        if not self.chunked:
            if self.left is None:
                return data, b""
            take = data[:self.left]
            self.left -= len(take)
            return take, b""
        out: list[bytes] = []
        while data:
            if self.left == TRAILERS:  # after the last chunk: lines up to an empty one
                if data.startswith(b"\r\n") or b"\r\n\r\n" in data:
                    self.chunked, self.left = False, 0  # the body ended
                    return b"".join(out), b""
                if len(data) > MAX_HEAD:
                    raise ValueError("chunked trailers too long")
                return b"".join(out), data
            if self.left == SIZE_LINE:
                eol = data.find(b"\r\n")
                if eol < 0:
                    return b"".join(out), data
                size = int(data[:eol].split(b";", 1)[0], 16)
                data = data[eol + 2:]
                self.left = TRAILERS if size == 0 else size + 2  # the chunk and its CRLF
                continue
            assert self.left is not None
            take = data[:self.left]
            data = data[self.left:]
            self.left -= len(take)
            if self.left >= 2:
                out.append(take)
            else:  # the chunk is whole: drop what was read of its CRLF
                out.append(take[:len(take) - (2 - self.left)])
                self.left = SIZE_LINE
        return b"".join(out), b""

    def _end(self, reusable: bool) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)
        if not reusable and self.transport is not None:
            self.closed = True
            self.transport.close()

    def _fail(self, err: Exception) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(err)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def watch(self, timeout_s: float) -> None:
        """Fail the request when no byte came for timeout_s (checked at the deadline)."""
        if self.done is None or self.done.done():
            return
        idle = time.perf_counter() - self.last_rx
        if idle >= timeout_s:
            self._fail(TimeoutError(f"no byte for {timeout_s:g} s"))
        else:
            asyncio.get_running_loop().call_later(timeout_s - idle, self.watch, timeout_s)


class Pool:
    """Keep-alive connections to one origin, at most `limit` (0: no limit)."""

    def __init__(self, origin: Origin, limit: int, timeout_s: float) -> None:
        self.origin, self.limit, self.timeout_s = origin, limit, timeout_s
        self.idle: deque[_Conn] = deque()
        self.open = 0
        self.freed: asyncio.Condition | None = None
        self.ssl = ssl.create_default_context() if origin.scheme == "https" else None

    async def __aenter__(self) -> Pool:
        self.freed = asyncio.Condition()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, err: BaseException | None,
                        tb: TracebackType | None) -> None:
        while self.idle:
            conn = self.idle.pop()
            if conn.transport is not None:
                conn.transport.close()

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        origin = self.origin
        _, conn = await asyncio.wait_for(loop.create_connection(
            _Conn, origin.host, origin.port, ssl=self.ssl,
            server_hostname=origin.host if self.ssl else None), self.timeout_s)
        return conn

    async def _get(self) -> _Conn:
        assert self.freed is not None
        while True:
            while self.idle:
                conn = self.idle.pop()
                if not conn.closed:
                    return conn
                self.open -= 1
            if not self.limit or self.open < self.limit:
                self.open += 1
                try:
                    return await self._connect()
                except BaseException:
                    self.open -= 1
                    raise
            async with self.freed:
                await self.freed.wait()

    async def _put(self, conn: _Conn) -> None:
        assert self.freed is not None
        if conn.closed:
            self.open -= 1
        else:
            self.idle.append(conn)
        async with self.freed:
            self.freed.notify()

    async def post(self, path: str, headers: dict[str, str], body: bytes, sink: Sink) -> None:
        conn = await self._get()
        try:
            done = conn.start(request_bytes(self.origin, path, headers, body), sink)
            asyncio.get_running_loop().call_later(self.timeout_s, conn.watch, self.timeout_s)
            await done
        except BaseException:
            conn._fail(BrokenStream("abandoned"))
            raise
        finally:
            await self._put(conn)
