"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status."""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError", "error_body"]

#: OpenAI's ``error.type`` for each status the gateway answers with.
_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
          405: "invalid_request_error", 408: "invalid_request_error", 413: "invalid_request_error",
          429: "rate_limit_exceeded", 500: "server_error", 503: "server_error", 504: "server_error"}


class ApiError(Exception):
    """A request the gateway answers with ``status`` and an OpenAI error body; ``param`` names the field
    at fault (None when no one field is), ``headers`` go on the response (e.g. ``Retry-After``)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The JSON body of an error response."""
    return {"error": {"message": message, "type": _TYPES.get(status, "server_error"), "param": param, "code": code}}
