"""One generation request end to end: admit, stream (SSE) or collect, release.

`release()` runs whatever happens: a client that disconnects cancels its request in
the engine (aiohttp cancels the handler when the connection drops; a failed write
ends the stream), so every accepted request either completes or is cancelled.
"""

from __future__ import annotations

from aiohttp import web

from perfkit.engine.async_engine import RequestStream
from perfkit.engine.guard.grammar import Vocabulary
from perfkit.serve.protocol import ApiError, GenerateRequest
from perfkit.serve.responses import DONE, ResponseHead, Usage, chunk, usage_chunk, whole
from perfkit.serve.state import ServerState, finish_reason
from perfkit.serve.tokens import render_token

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
IGNORED_HEADER = "X-Perfkit-Ignored"  # sampling fields accepted but not honoured


def _headers(gen: GenerateRequest) -> dict[str, str]:
    return {IGNORED_HEADER: ", ".join(gen.ignored)} if gen.ignored else {}


async def generate(request: web.Request, state: ServerState,
                   gen: GenerateRequest) -> web.StreamResponse:
    stream = state.submit(gen)
    head = ResponseHead(gen.chat, state.model.name)
    grammar = state.engine.vocab if gen.tool_call else None
    try:
        if gen.stream:
            return await _stream(request, stream, gen, head, grammar)
        return await _collect(state, stream, gen, head, grammar)
    finally:
        state.release(stream)


async def _collect(state: ServerState, stream: RequestStream, gen: GenerateRequest,
                   head: ResponseHead, grammar: Vocabulary | None) -> web.Response:
    tokens = [event.token async for event in stream]
    finish = finish_reason(stream)
    if finish == "abort" and state.engine_error is not None:
        raise ApiError(500, f"the engine stopped: {state.engine_error}", code="engine_error",
                       type_="server_error")
    text = "".join(render_token(t, grammar) for t in tokens)
    usage = Usage(len(gen.prompt), len(tokens), stream.seq.num_cached_tokens)
    return web.json_response(whole(head, text, finish, usage), headers=_headers(gen))


async def _stream(request: web.Request, stream: RequestStream, gen: GenerateRequest,
                  head: ResponseHead, grammar: Vocabulary | None) -> web.StreamResponse:
    response = web.StreamResponse(headers={**SSE_HEADERS, **_headers(gen)})
    await response.prepare(request)
    num_tokens, ended = 0, False
    try:
        async for event in stream:
            ended = event.finished
            finish = finish_reason(stream) if ended else None
            text = render_token(event.token, grammar)
            await response.write(chunk(head, text, finish, num_tokens == 0, gen.include_usage))
            num_tokens += 1
        if not ended:  # cancelled (shutdown) or the engine stopped
            await response.write(chunk(head, "", "abort", num_tokens == 0, gen.include_usage))
        if gen.include_usage:
            usage = Usage(len(gen.prompt), num_tokens, stream.seq.num_cached_tokens)
            await response.write(usage_chunk(head, usage))
        await response.write(DONE)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away; release() cancels the request in the engine
    return response
