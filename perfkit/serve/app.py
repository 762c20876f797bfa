"""Routes: the OpenAI-compatible endpoints, /health, /metrics; errors as OpenAI JSON.

    POST /v1/completions        prompt (string or token ids) -> text, streamed or whole
    POST /v1/chat/completions   messages -> message / deltas
    GET  /v1/models             the one model: the profile's name
    GET  /health                200 while the engine loop runs; 503 draining or failed
    GET  /metrics               Prometheus text, or OpenMetrics when asked (metrics.py)
    POST /tokenize, /detokenize vLLM's: text or messages <-> token ids (tokenize.py)
    POST /reset_prefix_cache    vLLM's: forget every cached prefix block (409 while busy)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from perfkit.serve import bounds, metrics, responses
from perfkit.serve.generate import generate
from perfkit.serve.protocol import ApiError, parse_request
from perfkit.serve.state import ServerState
from perfkit.serve.tokenize import detokenize_reply, tokenize_reply

STATE = web.AppKey("state", ServerState)
CREATED = web.AppKey("created", int)  # unix time the app was built (/v1/models)
log = logging.getLogger("perfkit.serve")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(err: ApiError) -> web.Response:
    headers = {} if err.retry_after_s is None else {"Retry-After": str(err.retry_after_s)}
    return web.json_response(err.body(), status=err.status, headers=headers)


@web.middleware
async def openai_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """ApiError, aiohttp's own HTTP errors (404, 405, 413) and bugs -> OpenAI error JSON."""
    try:
        return await handler(request)
    except ApiError as err:
        return error_response(err)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 413:
            return error_response(_too_large())
        code = exc.reason.lower().replace(" ", "_")
        return error_response(ApiError(exc.status, f"{exc.reason}: {request.method} "
                                       f"{request.path}", code=code))
    except Exception as exc:  # a bug: answer in JSON, keep serving
        log.exception("error while serving %s %s", request.method, request.path)
        return error_response(ApiError(500, f"internal error: {type(exc).__name__}: {exc}",
                                       code="internal_error", type_="server_error"))


def _too_large() -> ApiError:
    return ApiError(413, f"the request body is larger than {bounds.MAX_BODY_BYTES} bytes",
                    code="request_too_large")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def _json_body(request: web.Request) -> Any:
    """The body as JSON at most bounds.MAX_DEPTH deep; too big, invalid or too deep: 4xx."""
    if (request.content_length or 0) > bounds.MAX_BODY_BYTES:
        raise _too_large()  # before reading it
    raw = await request.read()  # a chunked body over client_max_size: HTTP 413 -> _too_large
    too_deep = ApiError(400, f"the body nests arrays or objects more than {bounds.MAX_DEPTH} "
                        "deep", code="too_deeply_nested")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:  # deeper than the interpreter's stack, so deeper than MAX_DEPTH
        raise too_deep from None
    except (UnicodeDecodeError, ValueError) as err:  # JSONDecodeError, NaN, Infinity
        raise ApiError(400, f"the body is not valid JSON: {err}", code="invalid_json") from None
    if not bounds.depth_within(body, bounds.MAX_DEPTH):
        raise too_deep
    return body


async def completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    gen = parse_request(await _json_body(request), state.model, chat=False)
    return await generate(request, state, gen)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    gen = parse_request(await _json_body(request), state.model, chat=True)
    return await generate(request, state, gen)


async def list_models(request: web.Request) -> web.Response:
    return web.json_response(responses.models(request.app[STATE].model.name,
                                              request.app[CREATED]))


async def health(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.draining:
        return web.json_response({"status": "draining"}, status=503)
    if not state.engine_alive:
        return web.json_response({"status": "engine stopped", "error": state.engine_error},
                                 status=503)
    return web.json_response({"status": "ok"})


async def prometheus(request: web.Request) -> web.Response:
    state = request.app[STATE]
    om = metrics.wants_openmetrics(request.headers.get("Accept", ""))
    text = metrics.render(metrics.collect(state), state.model.name, openmetrics=om)
    kind = metrics.OPENMETRICS_TYPE if om else metrics.CONTENT_TYPE
    return web.Response(body=text.encode(), headers={"Content-Type": kind})


async def tokenize(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await _json_body(request)
    return web.json_response(tokenize_reply(body, state.model, state.engine.max_model_len))


async def detokenize(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.json_response(detokenize_reply(await _json_body(request), state.model))


async def reset_prefix_cache(request: web.Request) -> web.Response:
    # The engine steps in this event loop, so this runs between two steps.
    if not request.app[STATE].engine.pool.reset_prefix_cache():
        raise ApiError(409, "requests are running: the prefix cache can be reset only when "
                       "the server is idle", code="busy")
    return web.json_response({"reset": True})


def build_app(state: ServerState) -> web.Application:
    app = web.Application(middlewares=[openai_errors], client_max_size=bounds.MAX_BODY_BYTES,
                          handler_args={"max_line_size": bounds.MAX_LINE_BYTES,
                                        "max_field_size": bounds.MAX_FIELD_BYTES})
    app[STATE] = state
    app[CREATED] = int(time.time())
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", prometheus)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
    return app
