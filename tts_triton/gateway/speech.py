"""One speech request end to end: checks, the Triton stream, encoding, and the streamed HTTP body.

The first audio chunk is awaited before the response starts, so that what Triton rejects (or Triton being
unreachable) becomes a proper 4xx/5xx; a client leaving during that wait stops the stream at once
(:func:`first_chunk`). From then on the body streams chunk by chunk. The body is an async generator: leaving it
early (the client went away, see :class:`AudioStreamResponse`) closes the Triton stream through the client
library, so the decoder stops. Speeds beyond the model's own range are finished here (:mod:`.stretch`).

A failure after the status line (Triton failing or timing out mid-stream) cannot change the status any more; it
ends the stream visibly: an SSE stream with an ``error`` event, an audio stream cut short (the connection closes
without the body's final chunk, :data:`~.protocol.CUT_EXTENSION`, which every HTTP client reports as an incomplete
body); either is counted as ``truncated`` and logged.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import numpy as np
from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from tts_triton.client import (
    AudioChunk,
    InvalidInputError,
    ServerBusyError,
    ServerUnavailableError,
    TTSError,
    TTSTimeoutError,
)
from tts_triton.core.contract import EMOTION, SPEED, TEXT, VOICE
from tts_triton.errors import BUSY, FAILED, INVALID_INPUT, KINDS, TIMED_OUT

from .encoders import FORMATS, new_encoder
from .errors import ApiError
from .metrics import GatewayMetrics
from .protocol import CUT_EXTENSION
from .schema import SpeechRequest
from .stretch import TimeStretch

__all__ = ["AudioStreamResponse", "SpeechStream", "api_error_for", "first_chunk", "media_type"]

log = logging.getLogger("tts_triton.gateway")
#: Seconds a client is asked to wait when Triton refuses a stream for its own stream limit.
BUSY_RETRY_AFTER_S = 1
#: The OpenAI field a Triton input came from, for the ``param`` of a 400.
_PARAMS = {TEXT: "input", VOICE: "voice", EMOTION: "instructions", SPEED: "speed"}


def api_error_for(error: TTSError) -> ApiError:
    """The HTTP error for a failed Triton request (no traceback, the server's message as it came): the status
    and code of its error kind (:data:`tts_triton.errors.KINDS`), or of its class when Triton itself failed it."""
    if isinstance(error, InvalidInputError):
        return ApiError(INVALID_INPUT.http, error.message, param=_PARAMS.get(error.input_name or ""))
    if isinstance(error, ServerBusyError):  # Triton's own admission limit: not started, worth retrying soon
        return ApiError(BUSY.http, f"the speech model is busy: {error.message}", code=BUSY.code,
                        headers={"Retry-After": str(BUSY_RETRY_AFTER_S)})
    if isinstance(error, ServerUnavailableError):
        return ApiError(503, f"the speech model is unavailable: {error.message}", code="model_unavailable")
    if isinstance(error, TTSTimeoutError):
        return ApiError(TIMED_OUT.http, f"synthesis timed out: {error.message}", code=TIMED_OUT.code)
    kind = KINDS.get(error.kind or "", FAILED)
    return ApiError(kind.http, f"synthesis failed: {error.message}", code=kind.code)


async def first_chunk(chunks: AsyncGenerator[AudioChunk, None], receive: Receive) -> AudioChunk:
    """The stream's first chunk; raises the :class:`ApiError` for a request Triton failed, or
    :class:`ClientDisconnect` when ``receive`` says the client left first (``chunks`` closed: stopped in-band)."""
    reading = asyncio.ensure_future(anext(chunks))
    leaving = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        leaving.cancel()
        if not reading.done():
            reading.cancel()  # one CancelledError: the client library stops the stream in-band and waits for it
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({reading})
    if reading.cancelled():
        await chunks.aclose()  # a no-op after the in-band stop; closes a stream that had not started
        raise ClientDisconnect
    try:
        return reading.result()
    except TTSError as e:
        await chunks.aclose()
        raise api_error_for(e) from None
    except StopAsyncIteration:
        raise ApiError(500, "the server ended the stream without audio", code="synthesis_failed") from None


async def _disconnect(receive: Receive) -> None:
    """Return once the client has disconnected (the request's body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class SpeechStream:
    """The streamed body of one request (:meth:`body`) and its end (:meth:`close`: the Triton stream
    closed, the outcome counted, the stream's slot released), whether or not the body ever ran."""

    def __init__(self, request: SpeechRequest, first: AudioChunk, chunks: AsyncGenerator[AudioChunk, None],
                 metrics: GatewayMetrics, started: float, release: Callable[[], None], *, stretch: float = 1.0) -> None:
        self.request, self.first, self.chunks = request, first, chunks
        self.metrics, self.started, self._release = metrics, started, release
        self.stretch = stretch
        self.outcome = "disconnected"
        self.failed = False  # a failure after the status line: the body must not end as if whole
        self._closed = False

    async def body(self) -> AsyncIterator[bytes]:
        """The encoded audio (or SSE events). A Triton error mid-stream ends it (SSE: with an ``error`` event),
        sets :attr:`failed` and counts the request as ``truncated`` (module docstring)."""
        request, metrics = self.request, self.metrics
        fmt, sse = request.response_format, request.stream_format == "sse"
        encoder = new_encoder(fmt, self.first.sample_rate)
        stretcher = TimeStretch(self.stretch, self.first.sample_rate) if self.stretch != 1.0 else None
        sent, deltas = 0, 0

        def audio(samples: np.ndarray) -> np.ndarray:
            return stretcher.process(samples) if stretcher else samples

        def frame(data: bytes) -> bytes:
            nonlocal sent, deltas
            if not sent and data:
                metrics.first_byte.labels(fmt).observe(time.perf_counter() - self.started)
            sent += len(data)
            metrics.bytes_out.labels(fmt).inc(len(data))
            if not sse or not data:
                return data
            deltas += 1
            return _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})

        yield frame(encoder.encode(audio(self.first.audio)))
        try:
            async for chunk in self.chunks:
                yield frame(encoder.encode(audio(chunk.audio)))
        except TTSError as e:
            self.outcome, self.failed = "truncated", not sse
            log.warning("a %s stream failed after %d bytes, its status line sent: %s; %s", fmt, sent, e,
                        "an SSE error event ends it" if sse else "its body is cut short")
            if sse:
                yield _event({"type": "error", **api_error_for(e).body()})
            return
        yield frame((encoder.encode(stretcher.finish()) if stretcher else b"") + encoder.finish())
        if sse:
            # No tokenizer here: input_tokens counts characters, output_tokens the audio deltas.
            usage = {"input_tokens": len(request.input), "output_tokens": deltas,
                     "total_tokens": len(request.input) + deltas}
            yield _event({"type": "speech.audio.done", "usage": usage})
        self.outcome = "ok"

    async def close(self) -> None:
        """Close the Triton stream (a no-op if it ended), count the outcome, release the slot; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.chunks.aclose()
        finally:
            self.metrics.requests.labels(self.outcome, self.request.response_format).inc()
            self._release()


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def media_type(request: SpeechRequest) -> str:
    return "text/event-stream" if request.stream_format == "sse" else FORMATS[request.response_format].media_type


class AudioStreamResponse(StreamingResponse):
    """The response of a :class:`SpeechStream`; it stops as soon as the client disconnects, not at the next
    chunk: it listens for ``http.disconnect`` while sending, then ends the stream.

    Plain asyncio tasks, not a cancel scope: a cancelled task gets one ``CancelledError``, so the client
    library's cleanup (the in-band stop, awaited) runs to its end instead of being cancelled again.
    """

    def __init__(self, stream: SpeechStream, media_type: str, headers: dict[str, str]) -> None:
        super().__init__(stream.body(), media_type=media_type, headers=headers)
        self.stream = stream
        self.scope_extensions: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope_extensions = scope.get("extensions") or {}
        sending = asyncio.ensure_future(self._send(send))
        listening = asyncio.ensure_future(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait({sending, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            listening.cancel()
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            await self.body_iterator.aclose()  # type: ignore[attr-defined]
            await self.stream.close()

    async def _send(self, send: Send) -> None:
        with contextlib.suppress(OSError):  # the client went away while a chunk was being sent
            await self.stream_response(send)

    async def stream_response(self, send: Send) -> None:
        """Starlette's, but a failed stream's body never gets its end: the connection is cut instead."""
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if self.stream.failed and (cut := self.scope_extensions.get(CUT_EXTENSION)) is not None:
            await cut()
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
