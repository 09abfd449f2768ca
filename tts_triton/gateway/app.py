"""The gateway's ASGI app (Starlette): routes, error handling and the shared Triton client.

Routes: ``POST /v1/audio/speech`` (OpenAI's), ``GET /v1/audio/voices``, ``GET /v1/models`` and
``GET /v1/audio/models`` (OpenAI's list shape), ``GET /healthz`` (the process), ``GET /readyz`` (at least one
Triton endpoint reachable with ``tts`` ready), ``GET /metrics`` (Prometheus, per Triton endpoint too),
``GET /openapi.json`` (:mod:`.openapi`), and ElevenLabs' input-streaming WebSockets (:mod:`.stream_input`). The
Triton endpoints are balanced by the client library (least outstanding streams, ejection and probing, a retry
elsewhere before any audio: :mod:`tts_triton.client.balancer`). Every HTTP error, unexpected ones included, is
answered in OpenAI's shape (:mod:`.errors`), never with a traceback; a client that leaves at any point (while its
body is read, before the first audio byte, mid-stream) stops its synthesis and is counted as ``disconnected``,
without a log line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tts_triton.client import AsyncTTSClient, TTSError, VoiceCatalog
from tts_triton.core.contract import CONTROLS, PITCH, SPEED, VOLUME

from .config import GatewayConfig
from .deadline import BodyDeadline
from .encoders import available_formats
from .errors import ApiError, error_body
from .estimate import estimate_audio_seconds
from .instructions import read_instructions
from .limits import KeyQuotas, StreamLimiter, cache_scope, check_key
from .metrics import GatewayMetrics
from .openapi import openapi_document
from .schema import FIELDS, MODELS, OPENAI_SPEED_RANGE, STREAM_FORMATS, SpeechRequest, parse_speech_request
from .sessions import SessionHub
from .speech import AudioStreamResponse, SpeechStream, api_error_for, first_chunk, media_type
from .stream_input import stream_input_routes
from .stretch import split_speed

__all__ = ["create_app"]

log = logging.getLogger("tts_triton.gateway")
#: Seconds a fetched voice bank is reused before it is read from Triton again.
VOICE_BANK_TTL_S = 60.0
#: Seconds allowed for the readiness probe's calls to Triton.
READY_TIMEOUT_S = 2.0


class _State:
    """Per-app state: the shared gRPC client (created in the app's event loop), limits and metrics."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.client = AsyncTTSClient(config.triton_endpoints, timeout=config.request_timeout_s)
        self.limiter = StreamLimiter(config.max_streams, config.retry_after_s)
        self.quotas = KeyQuotas(config.streams_per_key, config.requests_per_minute, config.retry_after_s)
        self.metrics = GatewayMetrics(self.client.balancer)
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

    logged_fields: set[str] = set()

    async def speech(request: Request) -> Response:
        started = time.perf_counter()
        fmt = "unknown"
        try:
            key = check_key(state.config.api_keys, request.headers.get("authorization"))
            if key is not None:
                state.quotas.start(key)
            body = await _read_body(request, state.config.max_body_bytes)
            speech_request = parse_speech_request(body, max_input_chars=state.config.max_input_chars)
            fmt = speech_request.response_format
            _log_ignored(speech_request.ignored, logged_fields)
            return await _start(state, speech_request, started, request, key)
        except ApiError as e:
            state.metrics.requests.labels(_OUTCOMES.get(e.status, "error"), fmt).inc()
            if e.code in REFUSAL_LIMITS:
                state.metrics.refusals.labels(REFUSAL_LIMITS[e.code]).inc()
            raise
        except ClientDisconnect:  # gone while its body was read or before the first audio: nothing to answer
            state.metrics.requests.labels("disconnected", fmt).inc()
            return Response(status_code=400)

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

    async def models(request: Request) -> Response:
        check_key(state.config.api_keys, request.headers.get("authorization"))
        return JSONResponse(_model_list())

    async def audio_models(request: Request) -> Response:
        check_key(state.config.api_keys, request.headers.get("authorization"))
        # "models": the same list under the key some web UIs read (OpenWebUI's TTS settings).
        return JSONResponse({**_model_list(), "models": [{"id": m, "name": m} for m in MODELS]})

    async def openapi(_: Request) -> Response:
        try:
            bank = await state.bank()
        except ApiError:  # Triton cannot say now: any voice name
            return JSONResponse(openapi_document(state.config))
        return JSONResponse(openapi_document(state.config, [*bank.voices, *state.config.voice_map.openai_voices]))

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        if await state.client.is_ready(timeout=READY_TIMEOUT_S):
            return JSONResponse({"status": "ready"})
        return JSONResponse(error_body(503, f"no Triton endpoint of {state.client.url} is reachable with its "
                                            f"{state.client.model!r} model ready", code="not_ready"),
                            status_code=503)

    async def metrics(_: Request) -> Response:
        return Response(state.metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    routes = [
        Route("/v1/audio/speech", speech, methods=["POST"]),
        Route("/v1/audio/voices", voices, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/audio/models", audio_models, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *stream_input_routes(),
    ]
    handlers = {ApiError: _api_error, HTTPException: _http_error, Exception: _unexpected_error}
    middleware = [Middleware(BodyDeadline, seconds=state.config.body_timeout_s, metrics=state.metrics)]
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan, middleware=middleware)
    app.state.gateway = state
    app.state.sessions = SessionHub(state.config.sessions, state.metrics.registry, state.metrics.refusals)
    return app


#: The ``limit`` label of ``tts_gateway_refusals`` for each error code of a limit.
REFUSAL_LIMITS = {"too_many_streams": "streams", "key_too_many_streams": "key_streams",
                  "key_rate_limited": "key_rate", "audio_too_long": "audio_seconds", "input_too_long": "input_chars",
                  "body_too_large": "body_bytes"}
_OUTCOMES = {400: "bad_request", 401: "unauthorized", 408: "request_timeout", 413: "too_large", 429: "rejected",
             503: "unavailable", 504: "timeout"}
#: Distinct ignored field names logged per process (a client sending random names cannot flood the log).
_LOGGED_FIELDS_MAX = 100


def _log_ignored(names: tuple[str, ...], logged: set[str]) -> None:
    """Log each ignored field name the first time a request sends it."""
    new = [n for n in names if n not in logged][:max(0, _LOGGED_FIELDS_MAX - len(logged))]
    if new:
        logged.update(new)
        log.warning("POST /v1/audio/speech: ignored field(s) %s, not in OpenAI's body (%s); logged once each",
                    ", ".join(repr(n[:40]) for n in new), ", ".join(FIELDS))


def _model_list() -> dict[str, object]:
    return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "tts-triton"}
                                       for m in MODELS]}


async def _start(state: _State, request: SpeechRequest, started: float, http: Request, key: str | None) -> Response:
    """Check what needs the voice bank and the audio's estimated length, take the key's and the gateway's stream
    slots, open the Triton stream and await its first chunk."""
    bank = await state.bank()
    voice = state.config.voice_map.voice(request.voice, bank)
    directions = read_instructions(request.instructions, bank.emotions)
    low, high = OPENAI_SPEED_RANGE
    speed = min(max(request.speed * directions.speed, low), high)
    model_speed, stretch = split_speed(speed)
    seconds, bound = await estimate_audio_seconds(request.input, speed), state.config.max_audio_seconds
    if seconds > bound:
        raise ApiError(413, f"input: about {seconds:.0f} s of audio at speed {speed:g} (estimated from the text as it "
                            f"is read, numbers in words and SSML breaks included); the limit is {bound:g} s",
                       param="input", code="audio_too_long")
    release_key = state.quotas.acquire(key) if key is not None else None
    try:
        state.limiter.acquire()
    except ApiError:
        if release_key is not None:
            release_key()
        raise
    state.metrics.in_flight.inc()

    def release() -> None:
        state.limiter.release()
        if release_key is not None:
            release_key()
        state.metrics.in_flight.dec()

    try:
        chunks = state.client.stream(request.input, voice=voice, emotion=directions.emotion,
                                     speed=_unless(model_speed, CONTROLS[SPEED].neutral),
                                     pitch=_unless(directions.pitch, CONTROLS[PITCH].neutral),
                                     volume=_unless(directions.volume, CONTROLS[VOLUME].neutral),
                                     cache_scope=cache_scope(key, shared=state.config.shared_cache))
        first = await first_chunk(chunks, http.receive)
    except BaseException:
        release()
        raise
    stream = SpeechStream(request, first, chunks, state.metrics, started, release, stretch=stretch)
    return AudioStreamResponse(stream, media_type(request), {"Cache-Control": "no-store"})


def _unless(value: float, neutral: float) -> float | None:
    """``value``, or None (the server's default) when it is the control's neutral value."""
    return None if value == neutral else value


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
