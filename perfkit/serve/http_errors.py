"""HTTP requests aiohttp's parser refuses (a URL or header too long, bad framing) as
OpenAI's error JSON, logged on one line without a traceback.

aiohttp answers those before any route or middleware runs, from
`RequestHandler.handle_error` (plain text, and the exception logged with its
traceback); `JsonErrorRunner` serves with a handler that answers them in JSON instead.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

log = logging.getLogger("perfkit.serve")


def parse_error_body(exc: HttpProcessingError) -> tuple[int, dict[str, Any]]:
    """The status and OpenAI error body for one of the parser's errors."""
    status, code, message = 400, "bad_request", f"malformed HTTP request: {exc.message}"
    if isinstance(exc, LineTooLong):
        line, limit = exc.args[0], exc.args[1]
        if line[:1] in (b"/", "/"):  # the request target; else a header's name or value
            status, code, message = 414, "uri_too_long", f"the URL is longer than {limit} bytes"
        else:
            status, code = 431, "header_too_large"
            message = f"a request header is longer than {limit} bytes"
    elif "too many headers" in exc.message.lower():
        status, code = 431, "header_too_large"
        message = "the request has too many headers"
    return status, {"error": {"message": message, "type": "invalid_request_error",
                              "param": None, "code": code}}


class _JsonErrorHandler(RequestHandler):
    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError) or status >= 500 \
                or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        status, body = parse_error_body(exc)
        log.info("refused a request from %s: %d %s", request.remote, status,
                 body["error"]["message"])
        response = web.json_response(body, status=status)
        response.force_close()  # the parser's state is unknown after this: as aiohttp does
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorRunner(web.AppRunner):
    """`web.AppRunner` whose connections answer the parser's errors in JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer  # same state; only __call__ differs
        return server
