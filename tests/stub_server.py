"""A scriptable OpenAI-style streaming stub on a loopback port, run in its own thread
(tests/remote and tests/loadgen).

It streams `tokens_per_chunk` tokens per SSE chunk, can refuse (status + Retry-After),
stall, send no usage, cut a stream after a few chunks, or die: after `die_after`
requests it cuts the next stream and stops listening, so later requests find the
port closed (or their kept-alive connection cut). Every `stall_every`-th request waits
`stall_gap_s` before its chunk `stall_at` (chunks otherwise `chunk_gap_s` apart). With a
`profile_dir` it has vLLM's /start_profile and /stop_profile (stop writes a trace there).
Its chunks carry a response id ("cmpl-N"); with an `otlp_url` it posts one span per served
request there as vLLM does (span_source.py): its trace from the request's traceparent
(`propagate`, else a trace of its own), request id "cmpl-N-0", and its own queue
(`queue_s`: a wait before scheduling), prefill, decode, TTFT and e2e.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from span_source import payload, post, span


@dataclass
class StubConfig:
    tokens_per_chunk: int = 1
    status: int = 200
    retry_after: str | None = None
    usage: bool = True
    finish_reason: str = "length"
    stall_s: float = 0.0  # sleep before the first chunk
    cut_after_chunks: int | None = None  # drop the connection after this many chunks
    die_after: int | None = None  # requests served whole before the server dies
    metrics: Callable[[], str] = lambda: "vllm:num_requests_running 0\n"
    bodies: list[dict[str, Any]] = field(default_factory=list)  # every request body seen
    chunk_gap_s: float = 0.0  # sleep between chunks
    stall_every: int = 0  # every N-th request served stalls once (0: none)
    stall_at: int = 5  # before this chunk (0-based)
    stall_gap_s: float = 0.05
    profile_dir: Path | None = None  # serve /start_profile and /stop_profile
    profile_calls: list[str] = field(default_factory=list)  # "start <prefix>", "stop"
    seen_at: list[float] = field(default_factory=list)  # time.time() of every completion
    otlp_url: str | None = None  # post each served request's span here
    propagate: bool = True  # the span continues the request's traceparent
    queue_s: float = 0.0  # wait before "scheduling" a request (its span's queue)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class Stub:
    def __init__(self, cfg: StubConfig) -> None:
        self.cfg = cfg
        self.served = 0
        self.dead = False
        self._prefix = "trace"
        self.loop = asyncio.new_event_loop()
        self.runner: web.AppRunner | None = None
        self.site: web.TCPSite | None = None
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/metrics", self.metrics)
        if self.cfg.profile_dir is not None:
            app.router.add_post("/start_profile", self.start_profile)
            app.router.add_post("/stop_profile", self.stop_profile)
        return app

    async def start_profile(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        self.cfg.profile_calls.append(f"start {body.get('profile_prefix')}")
        self._prefix = str(body.get("profile_prefix") or "trace")
        return web.Response()

    async def stop_profile(self, request: web.Request) -> web.Response:
        self.cfg.profile_calls.append("stop")
        assert self.cfg.profile_dir is not None
        (self.cfg.profile_dir / f"{self._prefix}_rank0.pt.trace.json").write_text("{}")
        return web.Response()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.runner = web.AppRunner(self._app(), shutdown_timeout=0.5)
        self.loop.run_until_complete(self.runner.setup())
        self.site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(self.site.start())
        self.port = self.runner.addresses[0][1]
        self._ready.set()
        self.loop.run_forever()

    def start(self) -> Stub:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self.runner is not None:
            fut = asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop)
            fut.result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stub-model"}]})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.cfg.metrics())

    async def completions(self, request: web.Request) -> web.StreamResponse:
        cfg = self.cfg
        body = await request.json()
        cfg.bodies.append(body)
        cfg.seen_at.append(time.time())
        if self.dead:
            assert request.transport is not None
            request.transport.abort()  # a kept-alive connection to a dead server
            return web.Response()
        if cfg.status != 200:
            headers = {"Retry-After": cfg.retry_after} if cfg.retry_after else {}
            return web.json_response({"error": {"message": "no"}}, status=cfg.status,
                                     headers=headers)
        dying = cfg.die_after is not None and self.served >= cfg.die_after
        self.served += 1
        stalls = cfg.stall_every > 0 and self.served % cfg.stall_every == 0
        rid, times = f"cmpl-{self.served}", [time.time()]
        await asyncio.sleep(cfg.queue_s)
        times.append(time.time())  # scheduled
        resp = await self._stream(request, body["max_tokens"], 2 if dying else None, dying,
                                  cfg.stall_at if stalls else -1, rid, times)
        if cfg.otlp_url is not None:
            asyncio.get_running_loop().run_in_executor(
                None, post_span, cfg.otlp_url, request.headers.get("traceparent", ""),
                cfg.propagate, rid, times)
        return resp

    async def _stream(self, request: web.Request, max_tokens: int, cut: int | None,
                      dying: bool, stall_at: int = -1, rid: str = "cmpl-0",
                      times: list[float] | None = None) -> web.StreamResponse:
        times = [] if times is None else times
        cfg = self.cfg
        cut = cfg.cut_after_chunks if cut is None else cut
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.sleep(cfg.stall_s)
        sent, chunks = 0, 0
        while sent < max_tokens:
            gap = cfg.stall_gap_s if chunks == stall_at else cfg.chunk_gap_s
            if chunks and gap:
                await asyncio.sleep(gap)
            n = min(cfg.tokens_per_chunk, max_tokens - sent)
            sent += n
            finish = cfg.finish_reason if sent == max_tokens else None
            times.append(time.time())  # stamped before the write, as a server's span is:
            await resp.write(_sse({"id": rid, "choices": [{"index": 0, "text": "x" * n,
                                                           "finish_reason": finish}]}))
            chunks += 1
            if cut is not None and chunks >= cut:
                if dying:
                    self.dead = True
                    assert self.site is not None
                    await self.site.stop()  # stop listening: new connections are refused
                assert request.transport is not None
                request.transport.abort()
                return resp
        if cfg.usage:
            usage = {"prompt_tokens": 3, "completion_tokens": sent,
                     "prompt_tokens_details": {"cached_tokens": 2}}
            await resp.write(_sse({"choices": [], "usage": usage}))
        await resp.write(b"data: [DONE]\n\n")
        return resp


def post_span(url: str, parent: str, propagate: bool, rid: str, times: list[float]) -> None:
    """times: arrival, scheduled, each chunk (time.time()); the last chunk ends it."""
    arrival, scheduled, first, last = times[0], times[1], times[2], times[-1]
    if propagate:
        _, trace, parent_id, _ = parent.split("-")
    else:  # a server that starts a trace of its own
        trace, parent_id = secrets.token_hex(16), ""
    attrs = {"gen_ai.request.id": f"{rid}-0", "gen_ai.latency.time_in_queue": scheduled - arrival,
             "gen_ai.latency.time_in_model_prefill": first - scheduled,
             "gen_ai.latency.time_in_model_decode": last - first,
             "gen_ai.latency.time_to_first_token": first - arrival,
             "gen_ai.latency.e2e": last - arrival}
    post(url, payload(span(trace, secrets.token_hex(8), attrs, parent_id,
                           start_ns=int(arrival * 1e9), end_ns=int(last * 1e9))))
