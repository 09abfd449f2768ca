"""Who may open an input-streaming session (:mod:`.stream_input`): the limits, admission in all and per API key,
and the sessions' Prometheus metrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .stream_messages import CLOSE_LATER, SessionError

__all__ = ["SessionHub", "SessionLimits", "SessionMetrics"]

_FIRST_AUDIO_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)


@dataclass(frozen=True)
class SessionLimits:
    """Limits of the input-streaming sockets (a session: one socket)."""

    max_sessions: int = 64
    #: Sessions one API key may hold at once (anonymous gateways: only ``max_sessions``).
    max_sessions_per_key: int = 16
    #: Contexts open at once on one multi-stream-input socket (ElevenLabs' own limit).
    max_contexts: int = 5
    #: Characters a context may hold uncut.
    max_buffered_chars: int = 4096
    #: Characters of text in one message (a 64 KiB message of 4-byte characters holds this many).
    max_message_chars: int = 16_384
    #: Characters of text one session may send in all (about an hour of speech).
    max_session_chars: int = 50_000
    #: Seconds a session may last.
    max_session_s: float = 600.0
    #: Seconds without a message before the session is ended (ElevenLabs' default; ``?inactivity_timeout=``).
    inactivity_timeout_s: float = 20.0
    #: Seconds without new text before a buffered, incomplete piece is synthesized anyway.
    idle_flush_s: float = 1.0
    #: Pieces of one context synthesized or waiting to be sent at once (the one being sent and the next).
    max_pieces_ahead: int = 2
    #: Audio chunks of one piece waiting to be sent; past them the piece's synthesis waits for the client.
    max_chunks_ahead: int = 4
    #: Seconds a socket without a key in its handshake has to send it in its first message (outside the pool).
    auth_timeout_s: float = 5.0
    #: Sockets of one client address waiting for their key at once (behind a proxy: the proxy's address).
    max_keyless_per_address: int = 8
    #: ``Origin``s (``scheme://host[:port]``) whose web pages may open sessions; ``*``: any. A handshake without
    #: an Origin (every client that is not a browser) is not concerned.
    allowed_origins: tuple[str, ...] = ()
    #: Whether a key in the URL (``?xi_api_key=``) is accepted: off, since proxies and logs keep URLs.
    allow_key_in_url: bool = False


class SessionMetrics:
    """Per-session metrics in the gateway's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.sessions = Counter("tts_gateway_sessions", "Input-streaming sessions by endpoint and outcome.",
                                ["endpoint", "outcome"], registry=registry)
        self.active = Gauge("tts_gateway_sessions_active", "Input-streaming sessions open now.", registry=registry)
        self.first_audio = Histogram("tts_gateway_session_first_audio_seconds",
                                     "Seconds from a session's first piece being cut to its first audio sent.",
                                     buckets=_FIRST_AUDIO_BUCKETS, registry=registry)
        self.pieces = Counter("tts_gateway_session_pieces", "Pieces cut from streamed text, by what cut them.",
                              ["reason"], registry=registry)
        self.characters = Counter("tts_gateway_session_characters", "Characters of text received by sessions.",
                                  registry=registry)
        self.audio = Counter("tts_gateway_session_audio_seconds", "Seconds of audio sent by sessions.",
                             registry=registry)
        self.duration = Histogram("tts_gateway_session_seconds", "Seconds a session lasted.",
                                  buckets=(1, 5, 15, 30, 60, 120, 300, 600), registry=registry)
        self.keyless = Gauge("tts_gateway_sessions_awaiting_key",
                             "Sockets open without a key yet (waiting for their first message), outside the pool.",
                             registry=registry)


class SessionHub:
    """Admission (sessions in all and per key) and metrics of one gateway's sessions."""

    def __init__(self, limits: SessionLimits, registry: CollectorRegistry, refusals: Counter) -> None:
        self.limits = limits
        self.metrics = SessionMetrics(registry)
        self.refusals = refusals  # the gateway's tts_gateway_refusals, by limit
        self.active = 0
        self._per_key: dict[str, int] = {}
        self._keyless: dict[str, int] = {}

    def wait_for_key(self, address: str) -> Callable[[], None]:
        """Count a socket of ``address`` that waits for its key (the release function), or raise a 1013 when
        ``max_keyless_per_address`` of its sockets already wait."""
        cap = self.limits.max_keyless_per_address
        if self._keyless.get(address, 0) >= cap:
            self.refusals.labels("keyless_sockets").inc()
            raise SessionError(CLOSE_LATER, "too_many_sessions",
                               f"{cap} sockets of this address are open without an API key; send the key with the "
                               "handshake (the xi-api-key header)")
        self._keyless[address] = self._keyless.get(address, 0) + 1
        self.metrics.keyless.inc()

        def release() -> None:
            self.metrics.keyless.dec()
            self._keyless[address] -= 1
            if not self._keyless[address]:
                del self._keyless[address]

        return release

    def admit(self, key: str | None) -> Callable[[], None]:
        """Take a session slot (the release function) or raise a 1013 naming the limit."""
        limits = self.limits
        if self.active >= limits.max_sessions:
            self.refusals.labels("sessions").inc()
            raise SessionError(CLOSE_LATER, "too_many_sessions",
                               f"this gateway is at its limit of {limits.max_sessions} sessions; retry shortly")
        if key is not None and self._per_key.get(key, 0) >= limits.max_sessions_per_key:
            self.refusals.labels("key_sessions").inc()
            raise SessionError(CLOSE_LATER, "too_many_sessions",
                               f"this API key is at its limit of {limits.max_sessions_per_key} sessions")
        self.active += 1
        self.metrics.active.inc()
        if key is not None:
            self._per_key[key] = self._per_key.get(key, 0) + 1

        def release() -> None:
            self.active -= 1
            self.metrics.active.dec()
            if key is not None:
                self._per_key[key] -= 1
                if not self._per_key[key]:
                    del self._per_key[key]

        return release
