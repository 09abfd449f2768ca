"""HTTP client of ``tts_offline``: decoupled models cannot be served over HTTP, so no streaming here.

Several endpoints are balanced as for the gRPC clients (:mod:`~tts_triton.client.balancer`): each request goes to
the endpoint with the fewest requests in flight, and one that fails before answering is sent once more to
another endpoint (not after bad input or a timeout). Ejected endpoints come back after a readiness check
(:meth:`HttpTTSClient.is_ready`) or, when every endpoint is out, by being tried again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Unpack

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tts_triton.core.contract import TTS, TTS_OFFLINE
from tts_triton.core.endpoints import DEFAULT_HTTP_URL

from .balancer import Balancer, Endpoint
from .closing import Closing
from .errors import InvalidInputError, ServerUnavailableError, TTSError, TTSTimeoutError, translated_errors
from .request import RequestOptions, build_request
from .results import Synthesis, VoiceCatalog

__all__ = ["DEFAULT_HTTP_URL", "HttpTTSClient"]


class HttpTTSClient(Closing):
    """Blocking HTTP client: :meth:`synthesize` calls ``tts_offline`` (one response with the whole audio).

    The API matches :class:`~tts_triton.client.TTSClient` without ``stream``; a :class:`Synthesis`
    from here has ``chunks == 1`` and ``first_chunk_latency == total_time``. ``url`` is ``host:port``
    or ``http://host:port``, or several of them (a sequence, or comma-separated; ``dns:///NAME:PORT`` for every
    address of a name). ``voices()`` reads the voice bank from the config of ``voice_bank_model``
    (``tts`` by default: configs are readable over HTTP even for decoupled models).

    ``timeout`` (seconds, None for no limit; a method's own ``timeout`` overrides it) bounds
    connecting and each wait for network data: the HTTP transport has no overall deadline, but
    ``tts_offline`` sends nothing until the audio is complete, so in practice it bounds the request.
    tritonclient's HTTP client is gevent-based: use one client per thread.
    """

    def __init__(
        self,
        url: str | Sequence[str] = DEFAULT_HTTP_URL,
        *,
        model: str = TTS_OFFLINE,
        voice_bank_model: str = TTS,
        timeout: float | None = None,
    ) -> None:
        self.balancer = Balancer(url, scheme="http")
        self.url = ",".join(self.balancer.targets)
        self.model = model
        self.voice_bank_model = voice_bank_model
        self.timeout = timeout
        # tritonclient.http fixes timeouts per client object: keep one per address and distinct timeout.
        self._clients: dict[tuple[str, float | None], httpclient.InferenceServerClient] = {}

    def synthesize(self, text: str, **options: Unpack[RequestOptions]) -> Synthesis:
        """Synthesize ``text`` in one request. Raises :class:`TTSError` subclasses."""
        request = build_request(text, **options)
        tried: list[Endpoint] = []
        while True:
            endpoint = self.balancer.pick(tried) or self.balancer.pick()
            if endpoint is None:
                raise ServerUnavailableError(f"{self.url}: no address to send to (the name resolved to none)")
            tried.append(endpoint)
            client = self._http(endpoint.address, request.timeout)
            error = None
            try:
                start = time.perf_counter()
                with translated_errors():
                    result = client.infer(
                        self.model, request.infer_inputs(httpclient), outputs=request.requested_outputs(httpclient),
                        parameters=request.parameters,
                    )
                total = time.perf_counter() - start
                chunk = request.chunk(result, index=0, elapsed=total)
                return Synthesis.from_chunks([chunk] if chunk is not None else [], total)
            except TTSError as err:
                error = err
                if len(tried) > 1 or isinstance(err, InvalidInputError | TTSTimeoutError) or \
                        not self.balancer.untried(tried):
                    raise
                self.balancer.retried(endpoint)
            finally:
                self.balancer.done(endpoint, error)

    def voices(self, *, timeout: float | None = None) -> VoiceCatalog:
        """The server's voice bank, read from the ``voice_bank`` parameter of ``voice_bank_model``'s config (from
        the best endpoint that answers)."""
        error: TTSError = ServerUnavailableError(f"{self.url}: no address to ask")
        for endpoint in self.balancer.ranked():
            try:
                with translated_errors():
                    config = self._http(endpoint.address, timeout).get_model_config(self.voice_bank_model)
                return VoiceCatalog.from_model_config(config)
            except ServerUnavailableError as err:
                error = err
        raise error

    def is_ready(self, *, timeout: float | None = None) -> bool:
        """True when an endpoint is reachable and ``model`` ready there (each answer updates the balancer);
        never raises."""
        self.balancer.refresh()
        ready_any = False
        for endpoint in self.balancer.endpoints():
            client = self._http(endpoint.address, timeout)
            try:
                ready = bool(client.is_server_ready() and client.is_model_ready(self.model))
            except (InferenceServerException, OSError):
                ready = False
            self.balancer.probed(endpoint, ready)
            ready_any = ready_any or ready
        return ready_any

    def close(self) -> None:
        """Close the connections. Idempotent."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _http(self, address: str, timeout: float | None) -> httpclient.InferenceServerClient:
        seconds = self.timeout if timeout is None else timeout
        if (address, seconds) not in self._clients:
            self._clients[address, seconds] = httpclient.InferenceServerClient(
                address, connection_timeout=seconds, network_timeout=seconds
            )
        return self._clients[address, seconds]
