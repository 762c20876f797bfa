"""`running_server(...)`: a real `perfkit serve` on a free loopback port, for tests.

    with running_server("default", sets=("engine.cpu_threads=1",)) as base_url:
        openai.OpenAI(base_url=f"{base_url}/v1", api_key="x")...

The server runs in a background thread with its own event loop, so it works from
synchronous tests and from async ones (whose loop stays free). Leaving the block
drains it (`drain_timeout_s`, default 1 s) and joins the thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from perfkit.config.profile import Overrides, load_profile
from perfkit.serve.lifecycle import ServeOptions, Server, bind

START_TIMEOUT_S = 120.0


class _Thread(threading.Thread):
    def __init__(self, server: Server) -> None:
        super().__init__(name="perfkit-serve", daemon=True)
        self.server = server
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self.server.run(ready=lambda _: self.ready.set()))
        except BaseException as err:  # reported to the caller's thread
            self.error = err
        finally:
            self.ready.set()


@contextmanager
def running_server(profile_ref: str = "default", sets: Sequence[str] = (),
                   model: str | None = None, *, max_queued_tokens: int | None = None,
                   drain_timeout_s: float = 1.0, eos_token_id: int | None = None
                   ) -> Iterator[str]:
    """Yield the base URL (`http://127.0.0.1:PORT`, no `/v1`) of a started server."""
    profile = load_profile(profile_ref, Overrides(model=model, sets=tuple(sets)))
    options = ServeOptions(max_queued_tokens=max_queued_tokens, drain_timeout_s=drain_timeout_s,
                           eos_token_id=eos_token_id)
    server = Server(profile, options, bind("127.0.0.1", 0))
    thread = _Thread(server)
    thread.start()
    if not thread.ready.wait(START_TIMEOUT_S) or thread.error is not None:
        server.request_stop_threadsafe()
        raise RuntimeError(f"perfkit serve did not start: {thread.error!r}") from thread.error
    try:
        yield server.url
    finally:
        server.request_stop_threadsafe()
        thread.join(drain_timeout_s + 30)
    if thread.error is not None:
        raise RuntimeError(f"perfkit serve failed: {thread.error!r}") from thread.error
