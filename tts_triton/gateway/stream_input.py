"""ElevenLabs' input-streaming WebSockets: text comes in a few tokens at a time, audio goes out as it is made.

Routes: ``WS /v1/text-to-speech/{voice_id}/stream-input`` (one utterance per socket, what the official SDK's
``convert_realtime`` speaks) and ``WS /v1/text-to-speech/{voice_id}/multi-stream-input`` (several
``context_id``s on one socket, what Pipecat speaks).

Client messages (JSON objects; unknown fields are ignored): ``text`` (the first message's is usually ``" "``),
``flush: true`` (synthesize what is buffered now), ``voice_settings`` (``speed`` is used; the rest accepted
and ignored), ``generation_config.chunk_length_schedule``, ``xi_api_key``; ``{"text": ""}`` ends the
utterance (stream-input; on multi-stream-input it is a keep-alive); multi-stream-input adds ``context_id``,
``close_context: true`` (stop that context now) and ``close_socket: true`` (finish every context, then close).
Query: ``output_format`` (:mod:`.stream_formats`), ``model_id`` (accepted, ignored), ``inactivity_timeout``.
The API key (when the gateway has keys): the ``xi-api-key`` header, ``?xi_api_key=``, ``Authorization:
Bearer``, or the first message's ``xi_api_key``.

Server messages: ``{"audio": base64, "isFinal": null, "alignment": {...}, "normalizedAlignment": {...}}``
(:mod:`.alignment`), then ``{"isFinal": true}`` when the utterance is complete (multi: each carries
``contextId``); stream-input then closes normally. An error is ``{"message", "error", "code"}`` followed by a
close with that code: 1008 for a bad message, key or parameter, 1009 for too much buffered text, 1013 for a
session refused by a limit (at once, before any synthesis), 1011 when synthesis fails.

Each utterance is a :class:`~.stream_context.Context`: text is cut by :class:`~tts_triton.text.incremental.TextCutter`;
each piece is one streamed Triton request,
started as soon as it is cut (at most ``max_pieces_ahead`` at once per context) while earlier pieces' audio is
still being sent; audio goes out in order through one encoder per context, so the pieces join without gaps.
A closed socket cancels every request in flight (the client library's in-band stop: the decoder stops and
the interrupted request is not cached); an idle buffer is flushed after ``idle_flush_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .encoders import OutputFormat
from .errors import ApiError
from .limits import cache_scope, key_allowed
from .sessions import SessionHub
from .stream_context import Context, Stats
from .stream_formats import DEFAULT_OUTPUT_FORMAT, stream_format
from .stream_messages import (
    CLOSE_ERROR,
    CLOSE_LATER,
    CLOSE_OK,
    CLOSE_POLICY,
    CLOSE_TOO_BIG,
    MAX_INACTIVITY_TIMEOUT_S,
    SessionError,
    describe,
    optional_str,
    parse_message,
    schedule,
    speed,
)

__all__ = ["stream_input_routes"]

log = logging.getLogger("tts_triton.gateway.sessions")

#: Seconds an error message and close may take to reach a client that does not read.
FAIL_SEND_S = 5.0
#: Messages read from a socket ahead of the session handling them.
MAX_UNHANDLED_MESSAGES = 16
#: Characters of a first message that comes before any key (the key, and at most a little text).
MAX_KEYLESS_MESSAGE_CHARS = 4096


class _Session:
    """One socket: its messages, contexts, limits and end."""

    def __init__(self, websocket: WebSocket, multi: bool) -> None:
        self.websocket, self.multi = websocket, multi
        self.state = websocket.app.state.gateway
        self.hub: SessionHub = websocket.app.state.sessions
        self.limits = self.hub.limits
        self.endpoint = "multi-stream-input" if multi else "stream-input"
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.contexts: dict[str | None, Context] = {}
        self.voice = ""
        self.output_format: OutputFormat
        self.inactivity_s = self.limits.inactivity_timeout_s
        self.started = time.perf_counter()
        self.outcome = "ok"
        #: Options of every Triton request of the session (the cache's scope).
        self.request_options: dict[str, Any] = {}
        self._send_lock = asyncio.Lock()
        self._authorized = False
        self._key: str | None = None
        self._first: dict[str, Any] | None = None  # the message that brought the key, handled once admitted
        self._room = asyncio.Semaphore(MAX_UNHANDLED_MESSAGES)  # messages read ahead of the session
        self._characters = 0
        self._closing = False
        self._retired: list[Stats] = []

    async def run(self) -> None:
        if (origin := self._foreign_origin()) is not None:
            log.info("session %s refused: Origin %r is not allowed", self.endpoint, origin[:80])
            self.hub.metrics.sessions.labels(self.endpoint, "forbidden").inc()
            await self.websocket.close(CLOSE_POLICY)  # before the handshake completes: a 403
            return
        await self.websocket.accept()
        release: Callable[[], None] | None = None
        reader = asyncio.ensure_future(self._read())
        try:
            self._handshake()
            if not self._authorized:
                await self._await_key()
            if self._key is not None:
                self._start_quota(self._key)
            release = self.hub.admit(self._key)
            if (scope := cache_scope(self._key, shared=self.state.config.shared_cache)) is not None:
                self.request_options["cache_scope"] = scope
            await self._resolve_voice()
            await self._loop()
        except SessionError as e:
            self.outcome = "refused" if e.code == CLOSE_LATER else "error"
            await self._fail(e)
        except WebSocketDisconnect:
            self.outcome = "disconnected"
        except Exception as e:  # a bug: the client gets an internal error, never a traceback
            log.exception("unexpected error in a %s session", self.endpoint)
            self.outcome = "error"
            await self._fail(SessionError(CLOSE_ERROR, "internal_error", f"internal error ({type(e).__name__})"))
        finally:
            for context in self.contexts.values():
                context.cancel()
            reader.cancel()
            if release is not None:
                release()
                self._record()
            else:
                self.hub.metrics.sessions.labels(self.endpoint, self.outcome).inc()

    def _start_quota(self, key: str) -> None:
        """Count the session against its key's requests per minute (1013 over it)."""
        try:
            self.state.quotas.start(key)
        except ApiError as e:
            self.state.metrics.refusals.labels("key_rate").inc()
            raise SessionError(CLOSE_LATER, e.code or "rate_limited", e.message) from None

    def _foreign_origin(self) -> str | None:
        """The handshake's ``Origin`` when it is not allowed (a web page's socket), else None. Clients that are
        not browsers send none."""
        origin = self.websocket.headers.get("origin")
        allowed = self.limits.allowed_origins
        if origin is None or "*" in allowed or origin.rstrip("/") in allowed:
            return None
        return origin

    def _handshake(self) -> None:
        """Query parameters and the key from the handshake (the key may also come in the first message)."""
        params = self.websocket.query_params
        try:
            self.output_format = stream_format(params.get("output_format", DEFAULT_OUTPUT_FORMAT))
        except ValueError as e:
            raise SessionError(CLOSE_POLICY, "invalid_output_format", str(e)) from None
        timeout = params.get("inactivity_timeout")
        if timeout is not None:
            if not timeout.isdigit() or not 1 <= int(timeout) <= MAX_INACTIVITY_TIMEOUT_S:
                raise SessionError(CLOSE_POLICY, "invalid_inactivity_timeout",
                                   f"inactivity_timeout: expected 1-{MAX_INACTIVITY_TIMEOUT_S} seconds, "
                                   f"got {timeout!r:.20}")
            self.inactivity_s = float(timeout)
        headers = self.websocket.headers
        bearer = headers.get("authorization", "")
        in_url = params.get("xi_api_key")
        if in_url and self.state.config.api_keys and not self.limits.allow_key_in_url:
            raise SessionError(CLOSE_POLICY, "api_key_in_url",
                               "an API key in the URL (?xi_api_key=) is refused: proxies and logs keep URLs; send "
                               "the xi-api-key header or the first message's xi_api_key")
        candidates = [headers.get("xi-api-key"), in_url,
                      bearer[7:].strip() if bearer.lower().startswith("bearer ") else None]
        self._check_keys([c for c in candidates if c], final=False)

    async def _await_key(self) -> None:
        """The key from the first message, awaited outside the session pool for ``auth_timeout_s`` at most, with
        at most ``max_keyless_per_address`` sockets of one address waiting at once."""
        client = self.websocket.client
        release = self.hub.wait_for_key(client.host if client else "unknown")
        try:
            try:
                item = await asyncio.wait_for(self.inbox.get(), self.limits.auth_timeout_s)
            except TimeoutError:
                raise SessionError(CLOSE_POLICY, "invalid_api_key",
                                   f"missing API key: none came with the handshake (the xi-api-key header) or in a "
                                   f"first message within {self.limits.auth_timeout_s:g} s") from None
            if isinstance(item, BaseException):
                raise item
            self._room.release()
            if len(item) > MAX_KEYLESS_MESSAGE_CHARS:
                raise SessionError(CLOSE_POLICY, "invalid_api_key",
                                   f"missing API key: a first message of {len(item)} characters came before any key "
                                   f"(at most {MAX_KEYLESS_MESSAGE_CHARS} before the key)")
            message = parse_message(item)
            key = message.get("xi_api_key") or message.get("authorization")
            self._check_keys([key] if isinstance(key, str) and key else [], final=True)
            self._first = message
        finally:
            release()

    def _check_keys(self, candidates: list[str], *, final: bool) -> None:
        keys = self.state.config.api_keys
        if not keys:
            self._authorized = True
            return
        for candidate in candidates:
            if key_allowed(keys, candidate):
                self._authorized, self._key = True, candidate
                return
        if candidates or final:
            raise SessionError(CLOSE_POLICY, "invalid_api_key",
                               "incorrect API key" if candidates else
                               "missing API key: send the xi-api-key header or the first message's xi_api_key")

    async def _resolve_voice(self) -> None:
        voice_id = self.websocket.path_params["voice_id"]
        try:
            bank = await self.state.bank()
            self.voice = self.state.config.voice_map.voice(voice_id, bank)
        except ApiError as e:
            code = CLOSE_POLICY if e.status < 500 else CLOSE_ERROR
            raise SessionError(code, e.code or "invalid_voice_id", e.message) from None

    async def _read(self) -> None:
        """Hand the client's messages to the session's inbox, at most :data:`MAX_UNHANDLED_MESSAGES` ahead of it
        (then the socket is not read: a client that sends faster than its text is handled is held back)."""
        try:
            while True:
                await self._room.acquire()
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    self.inbox.put_nowait(WebSocketDisconnect(message.get("code", 1000)))
                    return
                self.inbox.put_nowait(message.get("text") if message.get("text") is not None else
                                      message.get("bytes"))
        except Exception as e:  # the connection broke: the session ends as a disconnect
            self.inbox.put_nowait(WebSocketDisconnect(getattr(e, "code", 1006)))

    async def _loop(self) -> None:
        last_message = last_text = time.perf_counter()
        if self._first is not None and await self._handle(self._first):
            last_text = time.perf_counter()
        while True:
            now = time.perf_counter()
            waits = [self.started + self.limits.max_session_s - now, last_message + self.inactivity_s - now]
            if any(c.cutter.buffered and not c.ended for c in self.contexts.values()):
                waits.append(last_text + self.limits.idle_flush_s - now)
            try:
                item = await asyncio.wait_for(self.inbox.get(), max(min(waits), 0.0))
            except TimeoutError:
                now = time.perf_counter()
                if now >= self.started + self.limits.max_session_s:
                    raise SessionError(CLOSE_POLICY, "session_too_long",
                                       f"the session passed its limit of {self.limits.max_session_s:g} s") from None
                if now >= last_message + self.inactivity_s:
                    self._finish_all()
                    last_message = math.inf  # only the contexts' ends remain to wait for
                else:
                    for context in list(self.contexts.values()):
                        if not context.ended:
                            context.flush()
                    last_text = now
                continue
            if isinstance(item, WebSocketDisconnect):
                raise item
            if isinstance(item, SessionError):
                raise item
            if item is _DONE:
                await self.websocket.close(CLOSE_OK)
                return
            last_message = time.perf_counter()
            self._room.release()
            if await self._handle(parse_message(item)):
                last_text = time.perf_counter()

    async def _handle(self, message: dict[str, Any]) -> bool:
        """Apply one client message; True when it carried text."""
        context_id = optional_str(message, "context_id") if self.multi else None
        if self.multi and message.get("close_socket") is True:
            self._finish_all()
            return False
        context = self.contexts.get(context_id)
        if self.multi and message.get("close_context") is True:
            if context is not None:
                context.cancel()
                self._retired.append(context.stats)
                del self.contexts[context_id]
                asyncio.ensure_future(self._send_final(context_id))
            return False
        text = message.get("text")
        if not isinstance(text, str) and (text is not None or not (self.multi and "flush" in message)):
            raise SessionError(CLOSE_POLICY, "invalid_message", f"text: expected a string, got {describe(text)}")
        if context is None:
            if self.multi and not text:
                return False  # a keep-alive, or a flush of a context that holds nothing
            context = self._open(context_id, message)
        elif context.ended:
            raise SessionError(CLOSE_POLICY, "invalid_message", 'text after the end of input ({"text": ""})')
        if text == "" and not self.multi:
            context.end()
        elif text:
            self._count(text)
            await context.feed(text)
        if message.get("flush") is True:
            context.flush()
        return bool(text)

    def _count(self, text: str) -> None:
        """Hold a message's text to ``max_message_chars`` and the session's to ``max_session_chars``."""
        limits = self.limits
        if len(text) > limits.max_message_chars:
            raise SessionError(CLOSE_TOO_BIG, "message_too_long",
                               f"a message holds {len(text)} characters of text; the limit is "
                               f"{limits.max_message_chars}: send the text in smaller messages")
        self._characters += len(text)
        if self._characters > limits.max_session_chars:
            raise SessionError(CLOSE_TOO_BIG, "session_text_too_long",
                               f"the session has sent {self._characters} characters of text; the limit of a session "
                               f"is {limits.max_session_chars}: open another session")

    def _open(self, context_id: str | None, message: dict[str, Any]) -> Context:
        if len(self.contexts) >= self.limits.max_contexts:
            raise SessionError(CLOSE_POLICY, "too_many_contexts",
                               f"{len(self.contexts)} contexts are open; the limit is {self.limits.max_contexts}")
        context = Context(self, context_id, speed(message), schedule(message))
        self.contexts[context_id] = context
        return context

    def _finish_all(self) -> None:
        if not self.contexts:
            self.inbox.put_nowait(_DONE)
        self._closing = True
        for context in self.contexts.values():
            context.end()

    def context_done(self, context: Context) -> None:
        """A context sent its final message: stream-input (or a closing socket) ends when all have."""
        if self.contexts.get(context.id) is context and self.multi:
            self._retired.append(context.stats)
            del self.contexts[context.id]
        if not self.multi or (self._closing and not self.contexts):
            self.inbox.put_nowait(_DONE)

    async def _send_final(self, context_id: str | None) -> None:
        with contextlib.suppress(Exception):  # the socket may be closing: the final message is moot then
            await self.send({"isFinal": True, "contextId": context_id})

    async def send(self, payload: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.websocket.send_text(json.dumps(payload, separators=(",", ":")))

    async def _fail(self, error: SessionError) -> None:
        log.info("session %s ended: %s (%s)", self.endpoint, error.message, error.error)
        # the client may be gone already, or not read (then its socket's buffer is full: bounded wait)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(FAIL_SEND_S):
                await self.send({"message": error.message, "error": error.error, "code": error.code})
                await self.websocket.close(error.code, error.error)

    def _record(self) -> None:
        metrics = self.hub.metrics
        stats = [*self._retired, *(c.stats for c in self.contexts.values())]
        seconds = time.perf_counter() - self.started
        metrics.sessions.labels(self.endpoint, self.outcome).inc()
        metrics.duration.observe(seconds)
        characters = sum(s.characters for s in stats)
        metrics.characters.inc(characters)
        first = next((s.first_audio_s for s in stats if s.first_audio_s is not None), None)
        log.info("session %s %s: %.1f s, %d contexts, %d characters, %d pieces, %.2f s of audio, first audio "
                 "%s after its piece was cut", self.endpoint, self.outcome, seconds, len(stats), characters,
                 sum(s.pieces for s in stats), sum(s.audio_s for s in stats),
                 "-" if first is None else f"{first * 1000:.0f} ms")


#: The inbox's marker for "every context has finished".
_DONE = object()


async def _stream_input(websocket: WebSocket) -> None:
    await _Session(websocket, multi=False).run()


async def _multi_stream_input(websocket: WebSocket) -> None:
    await _Session(websocket, multi=True).run()


def stream_input_routes() -> list[WebSocketRoute]:
    """The two WebSocket routes; the app must hold its ``_State`` as ``app.state.gateway`` and a
    :class:`SessionHub` as ``app.state.sessions``."""
    return [WebSocketRoute("/v1/text-to-speech/{voice_id}/stream-input", _stream_input),
            WebSocketRoute("/v1/text-to-speech/{voice_id}/multi-stream-input", _multi_stream_input)]
