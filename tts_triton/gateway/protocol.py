"""The gateway's HTTP/1.1 connections: uvicorn's h11 protocol with a deadline on request heads and a cap on
connections per process.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) but has no deadline for a request head
that arrives slowly, and its ``limit_concurrency`` answers a plain-text 503 only after counting tasks as well
as connections. This subclass adds the two things uvicorn lacks, and nothing else:

- **Head deadline**: a request's head (request line and headers) must arrive within ``header_timeout_s`` of
  the connection opening, or of its first byte on a kept-alive connection (the time between requests is
  uvicorn's keep-alive timeout). Past it the connection is closed, with a 408 in OpenAI's error shape when
  part of a head had arrived.
- **Connection cap**: a connection accepted while ``max_connections`` are open is answered, as soon as its
  head arrives, with a 503 in OpenAI's error shape, ``Retry-After`` and ``Connection: close``; it never reaches
  the app. The cap stays below the process's file-descriptor limit (:func:`raise_fd_limit`), so the kernel's
  accept never fails for want of descriptors.
- **Cutting a response short**: the app finds :data:`CUT_EXTENSION` in each request's ``scope["extensions"]``, an
  awaitable that closes the connection mid-body, so that a stream that fails after its status line ends without
  its final chunk: the client reads an incomplete body (httpx, requests and OpenAI's SDK raise), not a short
  success.

The body's deadline is the app's (:class:`~.deadline.BodyDeadline`): it answers 408 itself.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from .errors import error_body
from .metrics import GatewayMetrics

__all__ = ["CUT_EXTENSION", "FD_HEADROOM", "FrontDoor", "GatewayProtocol", "raise_fd_limit"]

log = logging.getLogger("tts_triton.gateway")
#: File descriptors kept beside the connections: the listening socket, Triton's gRPC channel, logs, imports.
FD_HEADROOM = 256
#: The scope extension holding a request's ``cut()`` (module docstring).
CUT_EXTENSION = "tts_triton.cut"
#: Seconds the bytes sent before a cut may take to leave; then the connection is dropped.
CUT_FLUSH_S = 5.0


@dataclass(frozen=True)
class FrontDoor:
    """What every connection of one gateway process is held to, and where its outcomes are counted."""

    header_timeout_s: float
    max_connections: int
    retry_after_s: int
    metrics: GatewayMetrics

    @functools.cached_property
    def refusal(self) -> Callable[..., Any]:
        """The ASGI app that answers a connection over the cap."""
        body = json.dumps(error_body(503, f"this gateway is at its limit of {self.max_connections} connections; "
                                          "retry shortly", code="too_many_connections")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"retry-after", str(self.retry_after_s).encode()), (b"connection", b"close")]

        async def refuse(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return refuse


async def _with_cut(app: Callable[..., Any], cut: Callable[[], Any], scope: dict[str, Any], receive: Any,
                    send: Any) -> None:
    scope.setdefault("extensions", {})[CUT_EXTENSION] = cut
    await app(scope, receive, send)


def _timeout_response(seconds: float) -> bytes:
    body = json.dumps(error_body(408, f"the request head did not arrive within {seconds:g} s",
                                 code="request_timeout")).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))


class GatewayProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus the head deadline and the connection cap of ``door`` (module docstring)."""

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None, *, door: FrontDoor) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.door = door
        self._head_timer: asyncio.TimerHandle | None = None
        self._lost = asyncio.Event()
        self.app = functools.partial(_with_cut, self.app, self.cut)

    async def cut(self) -> None:
        """End the connection in the middle of a response: what was sent leaves (within CUT_FLUSH_S), the final
        chunk never does. Returns once the connection is gone, so that uvicorn sees a client that left."""
        self.transport.close()
        try:
            await asyncio.wait_for(self._lost.wait(), CUT_FLUSH_S)
        except TimeoutError:
            self.transport.abort()
            await self._lost.wait()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.door.metrics.connections.inc()
        if len(self.connections) > self.door.max_connections:
            self.app = self.door.refusal
            self.door.metrics.refused.inc()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost.set()
        self._disarm()
        self.door.metrics.connections.dec()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head is complete (or the connection failed or was upgraded)

    def _should_upgrade(self) -> bool:
        # over the cap a WebSocket handshake gets the refusal too: uvicorn hands an upgrade to the app itself
        return self.app is not self.door.refusal and super()._should_upgrade()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm()
        self.door.metrics.connections.dec()  # the WebSocket protocol takes the connection over
        super().handle_websocket_upgrade(event)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.door.header_timeout_s, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        self.door.metrics.slow_clients.labels("head").inc()
        if self.conn.trailing_data[0]:  # part of a head arrived: say why the connection ends
            self.transport.write(_timeout_response(self.door.header_timeout_s))
        self.transport.close()


def raise_fd_limit(connections: int) -> int:
    """Raise this process's soft limit on open files to hold ``connections`` plus :data:`FD_HEADROOM` (never above
    the hard limit); returns the number of connections the resulting limit holds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + FD_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return connections if soft == resource.RLIM_INFINITY else min(connections, soft - FD_HEADROOM)
