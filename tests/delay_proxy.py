"""A reverse proxy on a loopback port that holds back every event of a streamed response
for `delay_s` after the previous one went on (a slow gateway, a throttling load balancer):
a response of n events takes at least n x delay_s, whatever the server's pace, and the time
it adds lies outside the server. Requests go upstream with their headers (traceparent too)
and body; GETs (/models) pass through. It runs in its own thread and event loop.
"""

from __future__ import annotations

import asyncio
import threading

import aiohttp
from aiohttp import web

PASSED = ("traceparent", "tracestate", "content-type", "authorization")


class DelayProxy:
    def __init__(self, upstream: str, delay_s: float) -> None:
        self.upstream = upstream.rstrip("/")  # http://host:port (no path)
        self.delay_s = delay_s
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() in PASSED}
        body = await request.read()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as s, \
                s.request(request.method, self.upstream + request.path_qs, data=body,
                          headers=headers) as up:
            resp = web.StreamResponse(status=up.status, headers={
                "Content-Type": up.headers.get("Content-Type", "application/octet-stream")})
            await resp.prepare(request)
            event = b""
            async for line in up.content:  # SSE: events end with a blank line
                event += line
                if line.strip() or request.method != "POST":
                    continue
                await asyncio.sleep(self.delay_s)
                await resp.write(event)
                event = b""
            if event:
                await resp.write(event)
            await resp.write_eof()
            return resp

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        self.loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self._runner.addresses[0][1]
        self._ready.set()
        self.loop.run_forever()

    def start(self) -> DelayProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
