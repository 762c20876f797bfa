"""One generation request end to end: admit every choice, stream (SSE) or collect, release.

A batched completion's prompts are one request each in the engine, one choice each in
the response (`index` = the prompt's place); streamed chunks of different choices
interleave as their tokens come. `release()` runs whatever happens: a client that
disconnects cancels its requests in the engine (aiohttp cancels the handler when the
connection drops; a failed write ends the stream), so every accepted request either
completes or is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web

from perfkit.engine.engine import TokenEvent
from perfkit.serve.choices import ChoiceState
from perfkit.serve.protocol import ApiError, GenerateRequest
from perfkit.serve.responses import DONE, ResponseHead, Usage, chunk, usage_chunk, whole
from perfkit.serve.state import ServerState

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
IGNORED_HEADER = "X-Perfkit-Ignored"  # fields accepted that change nothing here


def _headers(gen: GenerateRequest) -> dict[str, str]:
    return {IGNORED_HEADER: ", ".join(gen.ignored)} if gen.ignored else {}


async def generate(request: web.Request, state: ServerState,
                   gen: GenerateRequest) -> web.StreamResponse:
    choices: list[ChoiceState] = []
    try:
        for i, prompt in enumerate(gen.prompts):
            choices.append(ChoiceState(i, gen, prompt, state.submit(gen, prompt),
                                       state.engine))
        head = ResponseHead(gen.chat, state.model.name)
        if gen.stream:
            return await _stream(request, choices, gen, head)
        return await _collect(state, choices, gen, head)
    finally:
        for c in choices:
            state.release(c.stream)


def _total(choices: list[ChoiceState]) -> Usage:
    usages = [c.usage() for c in choices]
    return Usage(sum(u.prompt_tokens for u in usages), sum(u.completion_tokens for u in usages),
                 sum(u.cached_tokens for u in usages))


async def _collect(state: ServerState, choices: list[ChoiceState], gen: GenerateRequest,
                   head: ResponseHead) -> web.Response:
    for c in choices:
        async for event in c.stream:
            c.collect(event)
    if any(c.finish() == "abort" for c in choices) and state.engine_error is not None:
        raise ApiError(500, f"the engine stopped: {state.engine_error}", code="engine_error",
                       type_="server_error")
    parts = [c.whole() for c in choices]
    prompt_lp = choices[0].prompt_logprobs() if gen.chat else None
    return web.json_response(whole(head, parts, _total(choices), prompt_lp),
                             headers=_headers(gen))


async def _events(choices: list[ChoiceState]
                  ) -> AsyncIterator[tuple[ChoiceState, TokenEvent | None]]:
    """Every choice's events as they come; (choice, None) when its stream ended."""
    if len(choices) == 1:
        async for event in choices[0].stream:
            yield choices[0], event
        yield choices[0], None
        return
    queue: asyncio.Queue[tuple[ChoiceState, TokenEvent | None]] = asyncio.Queue()

    async def pump(c: ChoiceState) -> None:
        try:
            async for event in c.stream:
                queue.put_nowait((c, event))
        finally:
            queue.put_nowait((c, None))

    tasks = [asyncio.create_task(pump(c)) for c in choices]
    try:
        for _ in choices:
            while True:
                item = await queue.get()
                yield item
                if item[1] is None:
                    break
    finally:
        for task in tasks:
            task.cancel()


async def _stream(request: web.Request, choices: list[ChoiceState], gen: GenerateRequest,
                  head: ResponseHead) -> web.StreamResponse:
    response = web.StreamResponse(headers={**SSE_HEADERS, **_headers(gen)})
    await response.prepare(request)
    ended: set[int] = set()
    try:
        async for c, event in _events(choices):
            if event is None:
                if c.index not in ended:  # cancelled (shutdown) or the engine stopped
                    await response.write(chunk(head, c.closing(), None, gen.include_usage))
                continue
            part = c.on_event(event)
            if event.finished:
                ended.add(c.index)
            usage = c.usage() if gen.continuous_usage else None
            await response.write(chunk(head, part, usage, gen.include_usage))
        if gen.include_usage:
            await response.write(usage_chunk(head, _total(choices)))
        await response.write(DONE)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away; release() cancels the requests in the engine
    return response
