"""What one gateway serves and its limits (:class:`GatewayConfig`): read by the app (:mod:`.app`), its OpenAPI
document (:mod:`.openapi`) and the server that runs it (:mod:`.server`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tts_triton.core.endpoints import DEFAULT_GRPC_URL

from .sessions import SessionLimits
from .voice_map import VoiceMap

__all__ = ["GatewayConfig"]


@dataclass(frozen=True)
class GatewayConfig:
    """What one gateway serves and its limits. ``triton_endpoints``: Triton's gRPC addresses, each ``host:port`` or
    ``dns:///NAME:PORT`` (comma-separated lists allowed). ``api_keys`` empty: no key is asked for."""

    triton_endpoints: tuple[str, ...] = (DEFAULT_GRPC_URL,)
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
    #: Limits of the ElevenLabs-compatible input-streaming WebSockets (:mod:`.stream_input`).
    sessions: SessionLimits = field(default_factory=SessionLimits)
    #: Seconds a request head may take to arrive (from the connection's start, or its next request's first byte).
    header_timeout_s: float = 10.0
    #: Seconds a request body may take to arrive after its head (64 KiB in 10 s: a 52 kbit/s client).
    body_timeout_s: float = 10.0
    #: Seconds an idle kept-alive connection stays open (uvicorn's ``timeout_keep_alive``).
    keep_alive_s: float = 5.0
    #: Connections open at once in this process; one more is answered 503 (:mod:`.protocol`).
    max_connections: int = 8192
    #: Streams one API key may hold at once (None: a quarter of ``max_streams``, at least 1); with keys only.
    max_streams_per_key: int | None = None
    #: Requests (and sessions) one API key may start per minute (0: no bound); with keys only.
    requests_per_minute: int = 600
    #: Seconds of audio one request may ask for, estimated from its text before synthesis (:mod:`.estimate`); past
    #: it, 413 with both numbers (4,096 characters of English at speed 0.25 read ~810 s).
    max_audio_seconds: float = 900.0
    #: Whether cached audio is shared across API keys (off: each key's requests read and write only their own
    #: entries, so that no key can tell from a hit's speed what another key had spoken; :func:`.limits.cache_scope`).
    shared_cache: bool = False

    @property
    def streams_per_key(self) -> int:
        """The per-key stream limit in force."""
        return self.max_streams_per_key or max(1, self.max_streams // 4)
