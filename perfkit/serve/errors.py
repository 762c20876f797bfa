"""The error answer of perfkit serve: an HTTP status and OpenAI's error body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answer: status and OpenAI's `{"error": {message, type, param, code}}`."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None, type_: str = "invalid_request_error",
                 retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type_
        self.retry_after_s = retry_after_s  # sent as the Retry-After header (429, 503)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def invalid(param: str, message: str, code: str = "invalid_value") -> ApiError:
    """A 400 naming the field: `param: message`."""
    return ApiError(400, f"{param}: {message}", param=param, code=code)
