"""ASGI middleware bounding how long a request's body may take to arrive.

The head's deadline is the connection's (:mod:`.protocol`); from the moment the head is in, the body must
arrive within ``seconds``. A handler reading past that deadline gets a 408 :class:`~.errors.ApiError` from
``receive``, which the app answers in OpenAI's shape. A response that starts before its request's body was
read to the end (that 408, a 401 before the body is read, a route that takes no body) carries
``Connection: close``, so a client still trickling a body it was not asked for loses the connection with the
response instead of holding it. Reads after the body (waiting for a disconnect while streaming) are unbounded.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError
from .metrics import GatewayMetrics

__all__ = ["BodyDeadline"]


def _expects_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


class BodyDeadline:
    """``app`` with each HTTP request's body bounded to ``seconds`` after its head (module docstring)."""

    def __init__(self, app: ASGIApp, seconds: float, metrics: GatewayMetrics) -> None:
        self.app, self.seconds, self.metrics = app, seconds, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        body_read = not _expects_body(scope["headers"])

        async def bounded_receive() -> Message:
            nonlocal body_read
            if body_read:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                self.metrics.slow_clients.labels("body").inc()
                raise ApiError(408, f"the request body did not arrive within {self.seconds:g} s",
                               code="request_timeout") from None
            body_read = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not body_read:
                headers: list[Any] = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, bounded_receive, closing_send)
