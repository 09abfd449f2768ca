"""gRPC clients of the streaming ``tts`` model: :class:`TTSClient` (threads) and :class:`AsyncTTSClient` (asyncio).

The two mirror each other method for method; HTTP has its own :class:`~tts_triton.client.HttpTTSClient`.
Separate classes rather than one with a protocol switch: the transports differ in what they can do
(HTTP cannot stream a decoupled model) and in how they wait (blocking, ``await``, gevent), so a
switch would leave methods that fail for one protocol and return types that depend on an argument.
All share argument names, result types (:class:`AudioChunk`, :class:`Synthesis`) and exceptions.

Cancelling: every streamed request runs on a gRPC stream of its own, so closing the chunk iterator
before the last chunk cancels exactly that request on the server (the model sees
``is_cancelled()``). A ``for`` loop left with ``break`` closes a generator as soon as it is no longer
referenced (at once in CPython for ``for c in client.stream(...)``); use ``contextlib.closing`` /
``contextlib.aclosing`` or call ``close()`` / ``await aclose()`` to cancel at a definite point. An
asyncio task cancelled while awaiting a chunk cancels its request too.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from typing import Any, Unpack

import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcclient_aio
from tritonclient.utils import InferenceServerException

from tts_triton.contract import TTS
from tts_triton.endpoints import DEFAULT_GRPC_URL

from .closing import Closing
from .errors import TTSError, translate_error, translated_errors
from .request import RequestOptions, TTSRequest, build_request, chunk_from_result, is_final_response, parse_url
from .results import AudioChunk, Synthesis, VoiceBank

__all__ = ["DEFAULT_GRPC_URL", "AsyncTTSClient", "TTSClient"]

#: Seconds to wait for a broken stream's callback to report why it broke.
_CAUSE_WAIT = 5.0


class TTSClient(Closing):
    """Blocking gRPC client of ``tts``; ``url`` is ``host:port`` or ``grpc://host:port``.

    ``timeout`` (seconds, None for no limit) bounds every call; a method's own ``timeout`` overrides
    it. Thread-safe: concurrent streams each get their own gRPC stream (tritonclient allows one per
    client object, so idle ones are pooled; their channels share one connection). Works under gevent
    (Locust) after ``grpc.experimental.gevent.init_gevent()``.
    """

    def __init__(self, url: str = DEFAULT_GRPC_URL, *, model: str = TTS, timeout: float | None = None) -> None:
        self.url = parse_url(url, "grpc")
        self.model = model
        self.timeout = timeout
        self._client = grpcclient.InferenceServerClient(self.url)
        self._idle: list[grpcclient.InferenceServerClient] = []
        self._lock = threading.Lock()
        self._closed = False

    def stream(self, text: str, **options: Unpack[RequestOptions]) -> Generator[AudioChunk, None, None]:
        """Synthesize ``text``, yielding audio chunks as the server sends them.

        Arguments are checked now (:class:`InvalidInputError`); the request is sent on the first
        ``next()``. Closing the generator early cancels the request (see the module docstring).
        ``options``: :class:`~tts_triton.client.RequestOptions`; ``timeout`` bounds the whole request.
        Raises :class:`TTSError` subclasses while iterating.
        """
        request = build_request(text, **options)
        return self._stream(request)

    def synthesize(self, text: str, **options: Unpack[RequestOptions]) -> Synthesis:
        """Synthesize ``text`` over the stream and return the whole utterance with its timing."""
        request = build_request(text, **options)
        start = time.perf_counter()
        chunks = list(self._stream(request))
        return Synthesis.from_chunks(chunks, time.perf_counter() - start)

    def voices(self, *, timeout: float | None = None) -> VoiceBank:
        """The server's voice bank, read from the ``voice_bank`` parameter of the model's config."""
        with translated_errors():
            config = self._client.get_model_config(self.model, as_json=True, client_timeout=self._timeout(timeout))
        return VoiceBank.from_model_config(config)

    def is_ready(self, *, timeout: float | None = None) -> bool:
        """True when the server is reachable and the model is ready; never raises."""
        try:
            timeout = self._timeout(timeout)
            return bool(self._client.is_server_ready(client_timeout=timeout)
                        and self._client.is_model_ready(self.model, client_timeout=timeout))
        except InferenceServerException:
            return False

    def close(self) -> None:
        """Release the connections; streams still open are closed when they finish. Idempotent."""
        with self._lock:
            self._closed = True
            clients, self._idle = [self._client, *self._idle], []
        for client in clients:
            client.close()

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    def _stream(self, request: TTSRequest) -> Generator[AudioChunk, None, None]:
        timeout = self._timeout(request.timeout)
        with self._lock:
            if self._closed:
                raise TTSError("the client is closed")
            client = self._idle.pop() if self._idle else grpcclient.InferenceServerClient(self.url)
        responses: queue.SimpleQueue[tuple[Any, InferenceServerException | None]] = queue.SimpleQueue()
        final = False
        try:
            start = time.perf_counter()
            with translated_errors():
                client.start_stream(lambda result, error: responses.put((result, error)), stream_timeout=timeout)
            try:
                client.async_stream_infer(
                    self.model, request.infer_inputs(grpcclient), outputs=request.requested_outputs(grpcclient),
                    enable_empty_final_response=True,
                )
            except InferenceServerException as e:
                # The stream broke before the request was queued (server unreachable); the stream
                # thread is handing the cause to the callback.
                try:
                    cause = responses.get(timeout=_CAUSE_WAIT)[1] or e
                except queue.Empty:
                    cause = e
                raise translate_error(cause) from cause
            index = 0
            while not final:
                result, error = responses.get()
                if error is not None:
                    raise translate_error(error) from error
                final = is_final_response(result)
                chunk = chunk_from_result(
                    result, index=index, elapsed=time.perf_counter() - start, return_mel=request.return_mel
                )
                if chunk is not None:
                    index += 1
                    yield chunk
        finally:
            client.stop_stream(cancel_requests=not final)
            with self._lock:
                if not self._closed:
                    self._idle.append(client)
                    client = None
            if client is not None:
                client.close()


class AsyncTTSClient:
    """asyncio twin of :class:`TTSClient`: the same methods, awaited, and ``stream`` yields with ``async for``.

    Concurrent streams share one channel. The gRPC channel is created on first use and belongs to
    that event loop: use one client per loop.
    """

    def __init__(self, url: str = DEFAULT_GRPC_URL, *, model: str = TTS, timeout: float | None = None) -> None:
        self.url = parse_url(url, "grpc")
        self.model = model
        self.timeout = timeout
        self._client: grpcclient_aio.InferenceServerClient | None = None

    def stream(self, text: str, **options: Unpack[RequestOptions]) -> AsyncGenerator[AudioChunk, None]:
        """Synthesize ``text``, yielding audio chunks as they arrive (``async for``); see :meth:`TTSClient.stream`."""
        request = build_request(text, **options)
        return self._stream(request)

    async def synthesize(self, text: str, **options: Unpack[RequestOptions]) -> Synthesis:
        """Synthesize ``text`` over the stream and return the whole utterance with its timing."""
        request = build_request(text, **options)
        start = time.perf_counter()
        chunks = [chunk async for chunk in self._stream(request)]
        return Synthesis.from_chunks(chunks, time.perf_counter() - start)

    async def voices(self, *, timeout: float | None = None) -> VoiceBank:
        """The server's voice bank, read from the ``voice_bank`` parameter of the model's config."""
        with translated_errors():
            config = await self._grpc().get_model_config(
                self.model, as_json=True, client_timeout=self._timeout(timeout)
            )
        return VoiceBank.from_model_config(config)

    async def is_ready(self, *, timeout: float | None = None) -> bool:
        """True when the server is reachable and the model is ready; never raises."""
        try:
            timeout = self._timeout(timeout)
            client = self._grpc()
            return bool(await client.is_server_ready(client_timeout=timeout)
                        and await client.is_model_ready(self.model, client_timeout=timeout))
        except InferenceServerException:
            return False

    async def close(self) -> None:
        """Close the channel, cancelling streams still open. Idempotent."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> AsyncTTSClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    def _grpc(self) -> grpcclient_aio.InferenceServerClient:
        if self._client is None:
            self._client = grpcclient_aio.InferenceServerClient(self.url)
        return self._client

    async def _stream(self, request: TTSRequest) -> AsyncGenerator[AudioChunk, None]:
        timeout = self._timeout(request.timeout)
        async def requests() -> AsyncIterator[dict[str, Any]]:
            # One request, then the request side closes; Triton ends the stream after the final response.
            yield {
                "model_name": self.model,
                "inputs": request.infer_inputs(grpcclient_aio),
                "outputs": request.requested_outputs(grpcclient_aio),
            }

        start = time.perf_counter()
        with translated_errors():
            responses = self._grpc().stream_infer(requests(), stream_timeout=timeout)
        finished = False
        try:
            index = 0
            with translated_errors():
                async for result, error in responses:
                    if error is not None:
                        raise translate_error(error) from error
                    chunk = chunk_from_result(
                        result, index=index, elapsed=time.perf_counter() - start, return_mel=request.return_mel
                    )
                    if chunk is not None:
                        index += 1
                        yield chunk
            finished = True
        finally:
            if not finished:
                responses.cancel()

