"""HTTP client of ``tts_offline``: decoupled models cannot be served over HTTP, so no streaming here."""

from __future__ import annotations

import time
from typing import Unpack

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tts_triton.core.contract import TTS, TTS_OFFLINE
from tts_triton.core.endpoints import DEFAULT_HTTP_URL

from .closing import Closing
from .errors import translated_errors
from .request import RequestOptions, build_request, parse_url
from .results import Synthesis, VoiceCatalog

__all__ = ["DEFAULT_HTTP_URL", "HttpTTSClient"]


class HttpTTSClient(Closing):
    """Blocking HTTP client: :meth:`synthesize` calls ``tts_offline`` (one response with the whole audio).

    The API matches :class:`~tts_triton.client.TTSClient` without ``stream``; a :class:`Synthesis`
    from here has ``chunks == 1`` and ``first_chunk_latency == total_time``. ``url`` is ``host:port``
    or ``http://host:port``. ``voices()`` reads the voice bank from the config of ``voice_bank_model``
    (``tts`` by default: configs are readable over HTTP even for decoupled models).

    ``timeout`` (seconds, None for no limit; a method's own ``timeout`` overrides it) bounds
    connecting and each wait for network data: the HTTP transport has no overall deadline, but
    ``tts_offline`` sends nothing until the audio is complete, so in practice it bounds the request.
    tritonclient's HTTP client is gevent-based: use one client per thread.
    """

    def __init__(
        self,
        url: str = DEFAULT_HTTP_URL,
        *,
        model: str = TTS_OFFLINE,
        voice_bank_model: str = TTS,
        timeout: float | None = None,
    ) -> None:
        self.url = parse_url(url, "http")
        self.model = model
        self.voice_bank_model = voice_bank_model
        self.timeout = timeout
        # tritonclient.http fixes timeouts per client object: keep one per distinct timeout.
        self._clients: dict[float | None, httpclient.InferenceServerClient] = {}

    def synthesize(self, text: str, **options: Unpack[RequestOptions]) -> Synthesis:
        """Synthesize ``text`` in one request. Raises :class:`TTSError` subclasses."""
        request = build_request(text, **options)
        client = self._http(request.timeout)
        start = time.perf_counter()
        with translated_errors():
            result = client.infer(
                self.model, request.infer_inputs(httpclient), outputs=request.requested_outputs(httpclient)
            )
        total = time.perf_counter() - start
        chunk = request.chunk(result, index=0, elapsed=total)
        return Synthesis.from_chunks([chunk] if chunk is not None else [], total)

    def voices(self, *, timeout: float | None = None) -> VoiceCatalog:
        """The server's voice bank, read from the ``voice_bank`` parameter of ``voice_bank_model``'s config."""
        with translated_errors():
            config = self._http(timeout).get_model_config(self.voice_bank_model)
        return VoiceCatalog.from_model_config(config)

    def is_ready(self, *, timeout: float | None = None) -> bool:
        """True when the server is reachable and ``model`` is ready; never raises."""
        client = self._http(timeout)
        try:
            return bool(client.is_server_ready() and client.is_model_ready(self.model))
        except (InferenceServerException, OSError):
            return False

    def close(self) -> None:
        """Close the connections. Idempotent."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _http(self, timeout: float | None) -> httpclient.InferenceServerClient:
        seconds = self.timeout if timeout is None else timeout
        if seconds not in self._clients:
            self._clients[seconds] = httpclient.InferenceServerClient(
                self.url, connection_timeout=seconds, network_timeout=seconds
            )
        return self._clients[seconds]

