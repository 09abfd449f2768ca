"""Client library for the tts-triton service.

- :class:`TTSClient` / :class:`AsyncTTSClient`: gRPC, streaming ``tts`` (blocking / asyncio), mirrored APIs.
- :class:`HttpTTSClient`: HTTP, ``tts_offline`` (one response; decoupled models cannot be served over HTTP).

Every method that sends a request takes the same keyword options, :class:`RequestOptions` (voice, emotion,
reference audio, timeout, MEL, speech controls, SSML, word timestamps).
Results are :class:`AudioChunk` and :class:`Synthesis`; every failure is a
:class:`TTSError` (:class:`InvalidInputError`, :class:`ServerUnavailableError` and its :class:`ServerBusyError`,
:class:`TTSTimeoutError`).

    with TTSClient("localhost:8001", timeout=30) as tts:
        for chunk in tts.stream("Hello there.", voice="alice", emotion="happy"):
            play(chunk.audio, chunk.sample_rate)
        tts.synthesize("Hello again.").save("hello.wav")
"""

from .audio_io import ReferenceAudio, load_reference_audio, save_wav
from .errors import InvalidInputError, ServerBusyError, ServerUnavailableError, TTSError, TTSTimeoutError
from .grpc_client import DEFAULT_GRPC_URL, AsyncTTSClient, TTSClient
from .request import RequestOptions, TTSRequest, build_request, build_stop
from .results import AudioChunk, Synthesis, VoiceCatalog, Word

_HTTP = ("DEFAULT_HTTP_URL", "HttpTTSClient")


def __getattr__(name: str) -> object:
    """The HTTP client loads on first use: ``tritonclient.http`` needs the ``http`` extra (gevent), which a
    gRPC-only environment (such as a GPU host's bench) may lack."""
    if name in _HTTP:
        from . import http_client  # optional dependency: tritonclient[http]

        return getattr(http_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DEFAULT_GRPC_URL",
    "DEFAULT_HTTP_URL",
    "AsyncTTSClient",
    "AudioChunk",
    "HttpTTSClient",
    "InvalidInputError",
    "ReferenceAudio",
    "RequestOptions",
    "ServerBusyError",
    "ServerUnavailableError",
    "Synthesis",
    "TTSClient",
    "TTSError",
    "TTSRequest",
    "TTSTimeoutError",
    "VoiceCatalog",
    "Word",
    "build_request",
    "build_stop",
    "load_reference_audio",
    "save_wav",
]
