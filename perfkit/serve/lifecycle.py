"""Bind, start, serve until asked to stop, drain, stop.

Shutdown (SIGTERM or SIGINT, or `request_stop()`):
1. draining: new requests get 503 (with Retry-After), /health answers 503;
2. in-flight requests run to completion for up to `drain_timeout_s`
   (a second signal skips the rest of the wait);
3. what is still running is cancelled: streams end with finish_reason "abort",
   non-streaming requests return what they have;
4. the HTTP server closes, the engine loop stops; the process exits 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.errors import PerfkitError
from perfkit.serve.app import build_app
from perfkit.serve.http_errors import JsonErrorRunner
from perfkit.serve.protocol import ModelInfo
from perfkit.serve.state import ServerState, default_quota
from perfkit.workload import RequestSpec

GRACE_S = 2.0  # after cancelling: time for handlers to write their last chunk


@dataclass(frozen=True)
class ServeOptions:
    max_queued_tokens: int | None = None  # token quota; None = default_quota(); 0 = none
    drain_timeout_s: float = 10.0
    # the model's end-of-sequence token (a request stops there unless ignore_eos); None:
    # the synthetic model has none, generation ends at max_tokens or a stop condition
    eos_token_id: int | None = None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a PerfkitError that says why not (port in use, bad host)."""
    try:
        return socket.create_server((host, port), backlog=128)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise PerfkitError(f"cannot listen on {host}:{port}: the address is already in "
                               "use; stop the other server or pick another --port") from None
        raise PerfkitError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None


def warm_up(engine: Engine) -> None:
    """One short request through every stage, then a clean engine (empty cache, zero
    counts): the first client does not pay lazy initialisation or compilation."""
    num_prompt = min(engine.block_size + 1, engine.max_model_len - 2)
    if num_prompt >= 1:
        engine.run_to_completion([RequestSpec(0, tuple(range(1, num_prompt + 1)), 2)])
    engine.reset()


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class Server:
    """One engine behind one HTTP listener, in the calling event loop."""

    def __init__(self, profile: Profile, options: ServeOptions, sock: socket.socket,
                 say: Callable[[str], None] = lambda _: None) -> None:
        self.profile = profile
        self.options = options
        self.sock = sock
        self.url = url_of(sock)
        self.say = say  # progress lines (the CLI prints them to stderr)
        self.state: ServerState | None = None
        self._runner: web.AppRunner | None = None
        self._stop = asyncio.Event()
        self._hurry = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, ready: Callable[[Server], None] | None = None) -> None:
        """Start, call `ready`, serve until request_stop(), then drain and stop."""
        self._loop = asyncio.get_running_loop()
        try:
            await self._start()
            if ready is not None:
                ready(self)
            await self._stop.wait()
        finally:
            await self._shutdown()

    def request_stop(self) -> None:
        """First call: drain, then stop. A later call: stop draining now."""
        if self._stop.is_set():
            self._hurry.set()
            return
        self._stop.set()

    def request_stop_threadsafe(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.request_stop)

    async def _start(self) -> None:
        engine = Engine(self.profile)  # builds the model: blocks the loop once, at start
        warm_up(engine)
        quota = self.options.max_queued_tokens
        defaults = dataclasses.replace(engine.default_params, output_text=True,
                                       eos_token_id=self.options.eos_token_id)
        model = ModelInfo(self.profile.name, self.profile.model.vocab_size, defaults)
        self.state = ServerState(engine, model, default_quota(engine) if quota is None else quota)
        await self.state.start()
        self._runner = JsonErrorRunner(build_app(self.state), handler_cancellation=True,
                                       access_log=None, shutdown_timeout=GRACE_S)
        await self._runner.setup()
        await web.SockSite(self._runner, self.sock).start()

    async def _shutdown(self) -> None:
        state = self.state
        if state is not None:
            state.draining = True
            if state.inflight:
                self.say(f"draining {len(state.inflight)} request(s), up to "
                         f"{self.options.drain_timeout_s:g} s (signal again to stop now)")
            if not await self._wait_idle(state, self.options.drain_timeout_s):
                self.say(f"cancelling {len(state.inflight)} unfinished request(s)")
                state.cancel_all()
                await self._wait_idle(state, GRACE_S)
        if self._runner is not None:
            await self._runner.cleanup()
        else:
            self.sock.close()
        if state is not None:
            await state.stop()

    async def _wait_idle(self, state: ServerState, timeout_s: float) -> bool:
        """Wait until nothing is in flight, the timeout passes or request_stop() hurries."""
        waits = [asyncio.ensure_future(state.idle.wait()),
                 asyncio.ensure_future(self._hurry.wait())]
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        for task in waits:
            task.cancel()
        return state.idle.is_set()


async def serve_until_signal(server: Server, ready: Callable[[Server], None]) -> None:
    """Run `server`; SIGTERM/SIGINT drain and stop it (a second one stops the drain)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_stop)
    try:
        await server.run(ready)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
