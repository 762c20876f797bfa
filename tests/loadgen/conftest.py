"""The known-timing streaming server (perfkit.loadgen.stream_server) on a loopback port, in
a thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator

import pytest

from perfkit.loadgen.stream_server import Timing, serve


class KnownServer:
    def __init__(self, timing: Timing,
                 new_loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
                 ) -> None:
        self.timing = timing
        self.loop = new_loop()
        self.port = 0
        self._ready = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        ready: asyncio.Future[int] = self.loop.create_future()
        self._task = self.loop.create_task(serve(self.timing, "127.0.0.1", 0, ready))
        self.port = self.loop.run_until_complete(ready)
        self._ready.set()
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self._task)

    def start(self) -> KnownServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._task is not None:
            self.loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)


@pytest.fixture
def known_server() -> Iterator[Callable[..., KnownServer]]:
    started: list[KnownServer] = []

    def start(ttft_s: float = 0.005, gap_s: float = 0.002, tokens: int = 8,
              first_chunk_bytes: int = 0,
              new_loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
              ) -> KnownServer:
        server = KnownServer(Timing(ttft_s, gap_s, tokens, first_chunk_bytes), new_loop).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
