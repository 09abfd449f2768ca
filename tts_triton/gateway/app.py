"""The gateway's ASGI app (Starlette): routes, error handling and the shared Triton client.

Routes: ``POST /v1/audio/speech`` (OpenAI's), ``GET /v1/audio/voices``, ``GET /healthz`` (the process),
``GET /readyz`` (Triton reachable and ``tts`` ready), ``GET /metrics`` (Prometheus). Every error, unexpected
ones included, is answered in OpenAI's shape (:mod:`.errors`), never with a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tts_triton.client import AsyncTTSClient, TTSError, VoiceCatalog
from tts_triton.core.contract import CONTROLS, SPEED
from tts_triton.core.endpoints import DEFAULT_GRPC_URL

from .encoders import available_formats
from .errors import ApiError, error_body
from .limits import StreamLimiter, check_key
from .metrics import GatewayMetrics
from .schema import STREAM_FORMATS, SpeechRequest, parse_speech_request
from .speech import AudioStreamResponse, SpeechStream, api_error_for, first_chunk, media_type
from .voices import VoiceMap

__all__ = ["GatewayConfig", "create_app"]

log = logging.getLogger("tts_triton.gateway")
#: Seconds a fetched voice bank is reused before it is read from Triton again.
VOICE_BANK_TTL_S = 60.0
#: Seconds allowed for the readiness probe's calls to Triton.
READY_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class GatewayConfig:
    """What one gateway serves and its limits. ``api_keys`` empty: no key is asked for."""

    triton_url: str = DEFAULT_GRPC_URL
    api_keys: frozenset[str] = frozenset()
    max_streams: int = 64
    #: OpenAI's own limit on ``input``.
    max_input_chars: int = 4096
    #: A body of 64 KiB holds any valid request (4,096 characters of at most 4 UTF-8 bytes, escaped).
    max_body_bytes: int = 64 * 1024
    #: Seconds one synthesis may take, end to end.
    request_timeout_s: float = 300.0
    retry_after_s: int = 1
    voice_map: VoiceMap = field(default_factory=VoiceMap)


class _State:
    """Per-app state: the shared gRPC client (created in the app's event loop), limits and metrics."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.client = AsyncTTSClient(config.triton_url, timeout=config.request_timeout_s)
        self.limiter = StreamLimiter(config.max_streams, config.retry_after_s)
        self.metrics = GatewayMetrics()
        self._bank: tuple[float, VoiceCatalog] | None = None

    async def bank(self) -> VoiceCatalog:
        """The server's voice bank (cached for VOICE_BANK_TTL_S); a 503 when Triton cannot say."""
        now = time.monotonic()
        if self._bank is None or now - self._bank[0] > VOICE_BANK_TTL_S:
            try:
                self._bank = (now, await self.client.voices(timeout=READY_TIMEOUT_S))
            except TTSError as e:
                raise api_error_for(e) from None
        return self._bank[1]


def create_app(config: GatewayConfig | None = None) -> Starlette:
    """The gateway app for ``config``; its Triton channel opens in the app's event loop and closes at shutdown."""
    state = _State(config or GatewayConfig())

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await state.client.close()

    async def speech(request: Request) -> Response:
        started = time.perf_counter()
        fmt = "unknown"
        try:
            check_key(state.config.api_keys, request.headers.get("authorization"))
            body = await _read_body(request, state.config.max_body_bytes)
            speech_request = parse_speech_request(body, max_input_chars=state.config.max_input_chars)
            fmt = speech_request.response_format
            return await _start(state, speech_request, started)
        except ApiError as e:
            state.metrics.requests.labels(_OUTCOMES.get(e.status, "error"), fmt).inc()
            raise

    async def voices(request: Request) -> Response:
        check_key(state.config.api_keys, request.headers.get("authorization"))
        bank = await state.bank()
        return JSONResponse({
            "voices": [{"id": v, "name": v} for v in bank.voices],
            "default_voice": bank.default_voice,
            "openai_voices": state.config.voice_map.table(bank),
            "emotions": list(bank.emotions),
            "default_emotion": bank.default_emotion,
            "formats": list(available_formats()),
            "stream_formats": list(STREAM_FORMATS),
        })

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        if await state.client.is_ready(timeout=READY_TIMEOUT_S):
            return JSONResponse({"status": "ready"})
        return JSONResponse(error_body(503, f"Triton at {state.config.triton_url} is unreachable or its "
                                            f"{state.client.model!r} model is not ready", code="not_ready"),
                            status_code=503)

    async def metrics(_: Request) -> Response:
        return Response(state.metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    routes = [
        Route("/v1/audio/speech", speech, methods=["POST"]),
        Route("/v1/audio/voices", voices, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    handlers = {ApiError: _api_error, HTTPException: _http_error, Exception: _unexpected_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    app.state.gateway = state
    return app


_OUTCOMES = {400: "bad_request", 401: "unauthorized", 413: "too_large", 429: "rejected", 503: "unavailable",
             504: "timeout"}


async def _start(state: _State, request: SpeechRequest, started: float) -> Response:
    """Check what needs the voice bank, take a stream slot, open the Triton stream and await its first chunk."""
    speed = CONTROLS[SPEED]
    if not speed.low <= request.speed <= speed.high:
        raise ApiError(400, f"speed: {request.speed:g} is outside this model's range {speed.low:g}-{speed.high:g}",
                       param="speed", code="unsupported_value")
    bank = await state.bank()
    voice = state.config.voice_map.voice(request.voice, bank)
    emotion = state.config.voice_map.emotion(request.instructions, bank)
    state.limiter.acquire()
    state.metrics.in_flight.inc()

    def release() -> None:
        state.limiter.release()
        state.metrics.in_flight.dec()

    try:
        chunks = state.client.stream(request.input, voice=voice, emotion=emotion,
                                     speed=None if request.speed == speed.neutral else request.speed)
        first = await first_chunk(chunks)
    except BaseException:
        release()
        raise
    stream = SpeechStream(request, first, chunks, state.metrics, started, release)
    return AudioStreamResponse(stream, media_type(request), {"Cache-Control": "no-store"})


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, or a 413 as soon as it passes ``limit`` bytes (declared or sent)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body has {declared} bytes; the limit is {limit}", code="body_too_large")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise ApiError(413, f"the request body exceeds the limit of {limit} bytes", code="body_too_large")
    return bytes(body)


async def _api_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse(error_body(exc.status_code, str(exc.detail)), status_code=exc.status_code,
                        headers=exc.headers)


async def _unexpected_error(_: Request, exc: Exception) -> Response:
    log.exception("unexpected error in the gateway")
    return JSONResponse(error_body(500, f"internal error ({type(exc).__name__})"), status_code=500)
