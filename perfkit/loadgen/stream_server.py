"""A streaming server of known timing: the load generator's own yardstick.

It does no inference. Every POST to /v1/completions or /v1/chat/completions streams
`max_tokens` chunks in OpenAI's SSE format, one token each: the first `ttft_s` after the
request's body was read, then one every `gap_s`, each due at an absolute time (start +
ttft + k * gap) so that a late chunk does not delay the next. A client measuring this
server should read TTFT = ttft_s and ITL = gap_s; what it reads beyond that is its own
error, or the server's lateness, which the server measures itself (GET /stats: how late
each chunk was written, min/p50/p99/max, never early; POST /stats/reset).

Written on asyncio's Protocol (uvloop where installed), HTTP/1.1 keep-alive with
chunked transfer coding, so that its own cost per chunk stays small beside the clients
it measures on the same cores.

    python -m perfkit.loadgen.stream_server --port 8123 --ttft 0.02 --gap 0.01
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from array import array
from dataclasses import dataclass

from perfkit.stats import quantile

MODEL = "stream-bench"
MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024  # a 128k-token prompt as JSON ids is under 1 MiB


@dataclass(frozen=True)
class Timing:
    ttft_s: float  # request read -> first chunk written
    gap_s: float  # between chunks
    tokens: int  # chunks when the request names no max_tokens
    first_chunk_bytes: int = 0  # pad the first chunk's text to this size (read-buffer tests)


class Lateness:
    """How late each chunk was written against its due time (seconds)."""

    def __init__(self) -> None:
        self.values = array("d")

    def add(self, late_s: float) -> None:
        self.values.append(late_s)

    def summary(self) -> dict[str, float | int | None]:
        ordered = sorted(self.values)
        n = len(ordered)

        def q(p: float) -> float | None:
            return quantile(ordered, p, presorted=True) if n else None

        return {"chunks": n, "late_min_s": ordered[0] if n else None,
                "late_p50_s": q(0.5), "late_p99_s": q(0.99),
                "late_max_s": ordered[-1] if n else None}


def _chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk carrying one SSE event."""
    event = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


def _reply(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status.encode(), ctype, len(body), body))


STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


class _Stream:
    """One response being streamed on its connection's transport."""

    def __init__(self, conn: _Conn, body: dict[str, object], chat: bool, rid: int) -> None:
        timing = conn.timing
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        self.n = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else timing.tokens
        prompt = body.get("prompt", body.get("messages", ""))
        self.prompt_tokens = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        self.conn, self.chat = conn, chat
        self.head = (b'{"id":"%s-%d","object":"%s","created":%d,"model":"' + MODEL.encode()
                     + b'","choices":[{"index":0,') % (
            b"chatcmpl" if chat else b"cmpl", rid,
            b"chat.completion.chunk" if chat else b"text_completion", int(time.time()))
        self.start = time.monotonic() + timing.ttft_s  # due times on the precise clock:
        self.k = 0  # uvloop's loop.time() is cached per iteration, in whole milliseconds

    def due(self, k: int) -> float:
        return self.start + k * self.conn.timing.gap_s

    def text(self, k: int) -> bytes:
        text = b" t%d" % (k + 1)
        pad = self.conn.timing.first_chunk_bytes
        return text + b"x" * (pad - len(text)) if k == 0 and pad > len(text) else text

    def event(self, k: int) -> bytes:
        last = k == self.n - 1
        finish = b'"length"' if last else b"null"
        if self.chat:
            choice = b'"delta":{"content":"%s"},"finish_reason":%s}]}' % (self.text(k), finish)
        else:
            choice = b'"text":"%s","logprobs":null,"finish_reason":%s}]}' % (self.text(k),
                                                                           finish)
        return self.head + choice

    def send(self) -> None:
        conn = self.conn
        if conn.transport is None or conn.transport.is_closing():
            return
        k = self.k
        early = self.due(k) - time.monotonic()
        if early > 0:  # uvloop truncates a delay to whole ms: never send before the due time
            conn.loop.call_later(early, self.send)
            return
        conn.server.lateness.add(-early)
        out = [_chunk(self.event(k))]
        self.k += 1
        if self.k < self.n:
            conn.loop.call_later(max(0.0, self.due(self.k) - time.monotonic()), self.send)
        else:
            usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.n,
                     "total_tokens": self.prompt_tokens + self.n}
            out.append(_chunk(b'{"id":"x","choices":[],"usage":%s}' % json.dumps(usage).encode()))
            out.append(_chunk(b"[DONE]"))
            out.append(b"0\r\n\r\n")
        conn.transport.write(b"".join(out))
        if self.k >= self.n:
            conn.stream_done()


class _Server:
    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.lateness = Lateness()
        self.requests = 0


class _Conn(asyncio.Protocol):
    """HTTP/1.1 on one connection: requests in order, one response at a time."""

    def __init__(self, server: _Server) -> None:
        self.server, self.timing = server, server.timing
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.streaming:
            self._next()

    def stream_done(self) -> None:
        self.streaming = False
        self._next()

    def _next(self) -> None:
        """Take the next whole request from the buffer, if there is one."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD and self.transport is not None:
                self.transport.close()
            return
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        method, path, *_ = lines[0].split(" ")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length > MAX_BODY:
            self._write(_reply("413 Payload Too Large", b"{}"))
            return
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4:end + 4 + length])
        del self.buf[:end + 4 + length]
        self._handle(method, path.split("?")[0], body)

    def _write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def _handle(self, method: str, path: str, body: bytes) -> None:
        server = self.server
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            try:
                request = json.loads(body)
            except ValueError:
                request = None
            if not isinstance(request, dict):
                self._write(_reply("400 Bad Request", b'{"error":{"message":"bad JSON"}}'))
                return self._next()
            server.requests += 1
            stream = _Stream(self, request, path.endswith("chat/completions"), server.requests)
            self.streaming = True
            self._write(STREAM_HEAD)
            self.loop.call_later(max(0.0, stream.start - time.monotonic()), stream.send)
            return None
        if method == "GET" and path == "/v1/models":
            self._write(_reply("200 OK", json.dumps({"object": "list", "data": [
                {"id": MODEL, "object": "model"}]}).encode()))
        elif method == "GET" and path == "/stats":
            stats = server.lateness.summary() | {"requests": server.requests}
            self._write(_reply("200 OK", json.dumps(stats).encode()))
        elif method == "POST" and path == "/stats/reset":
            server.lateness, server.requests = Lateness(), 0
            self._write(_reply("200 OK", b"{}"))
        elif method == "GET" and path == "/health":
            self._write(_reply("200 OK", b"{}"))
        else:
            self._write(_reply("404 Not Found", b'{"error":{"message":"not found"}}'))
        return self._next()


async def serve(timing: Timing, host: str, port: int, ready: asyncio.Future[int] | None = None
                ) -> None:
    """Serve until cancelled; `ready` gets the bound port."""
    server = _Server(timing)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: _Conn(server), host, port, backlog=4096)
    bound = srv.sockets[0].getsockname()[1]
    if ready is not None:
        ready.set_result(bound)
    print(f"listening on {host}:{bound}", flush=True)
    async with srv:
        await srv.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--ttft", type=float, default=0.02, help="seconds to the first chunk")
    parser.add_argument("--gap", type=float, default=0.01, help="seconds between chunks")
    parser.add_argument("--tokens", type=int, default=128, help="chunks without max_tokens")
    parser.add_argument("--first-chunk-bytes", type=int, default=0)
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args(argv)
    timing = Timing(args.ttft, args.gap, args.tokens, args.first_chunk_bytes)
    run = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop

            run = uvloop.run
        except ImportError:
            pass
    with contextlib.suppress(KeyboardInterrupt):
        run(serve(timing, args.host, args.port))


if __name__ == "__main__":
    main()
