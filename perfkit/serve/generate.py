"""One generation request end to end: admit every choice, stream (SSE) or collect, release.

A batched completion's prompts are one request each in the engine; each request has n
outputs (n, best_of, use_beam_search: one request whose outputs share the prompt's
blocks), one choice each in the response (`index` = prompt * n + output, as vLLM
numbers them); streamed chunks of different choices interleave as their tokens come.
best_of > n returns each prompt's n outputs of the highest log-probability (beams come
best first already). `release()` runs whatever happens: a client that
disconnects cancels its requests in the engine (aiohttp cancels the handler when the
connection drops; a failed write ends the stream), so every accepted request either
completes or is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web

from perfkit.engine.async_engine import RequestStream
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
            stream = state.submit(gen, prompt)
            choices += [ChoiceState(i * gen.n + j, gen, prompt, stream, state.engine, j)
                        for j in range(gen.best_of)]
        head = ResponseHead(gen.chat, state.model.name)
        if gen.stream:
            return await _stream(request, choices, gen, head)
        return await _collect(state, choices, gen, head)
    finally:
        for stream in _streams(choices):
            state.release(stream)


def _streams(choices: list[ChoiceState]) -> list[RequestStream]:
    """The engine requests behind the choices, in order (one per prompt)."""
    return list({id(c.stream): c.stream for c in choices}.values())


def _returned(choices: list[ChoiceState], gen: GenerateRequest) -> list[ChoiceState]:
    """Each prompt's n choices: all of them, or of best_of samples the n most likely,
    numbered prompt * n + rank."""
    if gen.best_of == gen.n:
        return choices
    out = []
    for p, stream in enumerate(_streams(choices)):
        mine = [c for c in choices if c.stream is stream]
        if not gen.beam_search:
            mine.sort(key=lambda c: -c.seq.cum_logprob)
        for rank, c in enumerate(mine[:gen.n]):
            c.index = p * gen.n + rank
            out.append(c)
    return out


def _total(choices: list[ChoiceState]) -> Usage:
    usages = [c.usage() for c in choices]
    return Usage(sum(u.prompt_tokens for u in usages), sum(u.completion_tokens for u in usages),
                 sum(u.cached_tokens for u in usages))


async def _collect(state: ServerState, choices: list[ChoiceState], gen: GenerateRequest,
                   head: ResponseHead) -> web.Response:
    for stream in _streams(choices):
        outputs = [c for c in choices if c.stream is stream]
        async for event in stream:
            outputs[event.index].collect(event)
    if any(c.finish() == "abort" for c in choices) and state.engine_error is not None:
        raise ApiError(500, f"the engine stopped: {state.engine_error}", code="engine_error",
                       type_="server_error")
    parts = [c.whole() for c in _returned(choices, gen)]
    prompt_lp = choices[0].prompt_logprobs() if gen.chat else None
    return web.json_response(whole(head, parts, _total(choices), prompt_lp),
                             headers=_headers(gen))


async def _events(choices: list[ChoiceState]
                  ) -> AsyncIterator[tuple[ChoiceState, TokenEvent | None]]:
    """Every choice's events as they come, each to the choice of its output; (choice,
    None) for each choice of a stream that ended."""
    streams = _streams(choices)
    queue: asyncio.Queue[tuple[RequestStream, TokenEvent | None]] = asyncio.Queue()

    async def pump(stream: RequestStream) -> None:
        try:
            async for event in stream:
                queue.put_nowait((stream, event))
        finally:
            queue.put_nowait((stream, None))

    tasks = [asyncio.create_task(pump(s)) for s in streams]
    try:
        left = len(streams)
        while left:
            stream, event = await queue.get()
            outputs = [c for c in choices if c.stream is stream]
            if event is not None:
                yield outputs[event.index], event
                continue
            left -= 1
            for c in outputs:
                yield c, None
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
            if event.ends_output:
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
