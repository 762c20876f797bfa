"""The asyncio front door: submit a request, stream its tokens, cancel it.

One background task steps the engine while it has work. A step is synchronous
(the model runs on this thread); between steps the loop yields, so clients
receive their tokens and submit new requests before the next step. That order
makes closed-loop runs deterministic: a client that finishes at step k submits
its next request before step k + 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from perfkit import clock
from perfkit.engine.engine import Engine, TokenEvent
from perfkit.engine.sampling_params import SamplingParams
from perfkit.engine.sequence import Sequence
from perfkit.workload import RequestSpec


class RequestStream:
    """Tokens of one request as they are appended; ends after the request's last token
    (a request with several outputs streams each output's tokens, `event.index`)."""

    def __init__(self, seq: Sequence, rejected: str | None) -> None:
        self.seq = seq
        self.rejected = rejected  # admission-control reason; the stream is empty then
        self.queue: asyncio.Queue[TokenEvent | None] = asyncio.Queue()
        self.cancelled = False  # ends the stream at once, even with tokens still queued
        if rejected is not None:
            self.queue.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[TokenEvent]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[TokenEvent]:
        while not self.cancelled:
            event = await self.queue.get()
            if event is None or self.cancelled:
                return
            yield event
            if event.finished:
                return


class AsyncEngine:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._streams: dict[int, RequestStream] = {}
        self._wake = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncEngine:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def submit(self, spec: RequestSpec, params: SamplingParams | None = None) -> RequestStream:
        seq, reason = self.engine.add_request(spec, params)
        stream = RequestStream(seq, reason)
        if reason is None:
            self._streams[seq.seq_id] = stream
            self._wake.set()
        return stream

    def cancel(self, stream: RequestStream) -> None:
        stream.cancelled = True
        self.engine.cancel(stream.seq)
        if self._streams.pop(stream.seq.seq_id, None) is not None:
            stream.queue.put_nowait(None)

    async def _loop(self) -> None:
        while not self._closed:
            if not self.engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                continue
            for event in self.engine.step():
                key = event.request.seq_id
                stream = self._streams.get(key)
                if stream is not None:
                    stream.queue.put_nowait(event)
                    if event.finished:
                        del self._streams[key]
            await asyncio.sleep(0)  # clients consume and submit before the next step
            await asyncio.sleep(0)
            clock.between_steps()  # a lockstep peer may run now (perfkit.clock)

    async def close(self) -> None:
        """Cancel what is in flight (streams end) and stop the loop."""
        for stream in list(self._streams.values()):
            self.cancel(stream)
        self._closed = True
        self._wake.set()
        if self._task is not None:
            await self._task
