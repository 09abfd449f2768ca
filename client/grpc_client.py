"""gRPC clients of the streaming ``tts`` model: :class:`TTSClient` (threads) and :class:`AsyncTTSClient` (asyncio).

The two mirror each other method for method; HTTP has its own :class:`~tts_triton.client.HttpTTSClient`.
Separate classes rather than one with a protocol switch: the transports differ in what they can do
(HTTP cannot stream a decoupled model) and in how they wait (blocking, ``await``, gevent), so a
switch would leave methods that fail for one protocol and return types that depend on an argument.
All share argument names, result types (:class:`AudioChunk`, :class:`Synthesis`) and exceptions.

Ending a stream early: closing the chunk iterator before the last chunk (``close()`` / ``await aclose()``,
leaving ``contextlib.closing`` / ``contextlib.aclosing``, or a ``for`` loop left with ``break``, which closes
the generator once it is no longer referenced) stops exactly that request in-band: the client sends a stop
naming the request (:func:`~tts_triton.client.build_stop`), the server ends the stream at its next decoder
call with a normal FINAL, and the client reads the stream to its end, for at most :data:`STOP_WAIT_S`.
No gRPC cancel is sent (Triton 2.51's gRPC frontend can crash around cancelled decoupled streams); only a
stream that does not end by then, or one that stalled, is cancelled. An asyncio task cancelled while awaiting
a chunk, or a ``timeout``, ends its request the same way. This is the one way the project's own code (the
gateway, the health check) ends a stream early.

Stalls and retries: a stream that gets no response for ``stall_timeout`` seconds (a dead model process
leaves its requests unanswered) fails with :class:`TTSTimeoutError`. A request that failed with
:class:`ServerUnavailableError` before any audio came (connection refused, server restarting) is sent again
up to ``retries`` times with exponential backoff; never one that produced audio, nor one the server refused
as busy (:class:`ServerBusyError`: retrying would add to the overload).
"""

from __future__ import annotations

import asyncio
import contextlib
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
from .errors import (
    ServerBusyError,
    ServerUnavailableError,
    TTSError,
    TTSTimeoutError,
    translate_error,
    translated_errors,
)
from .request import (
    RequestOptions,
    TTSRequest,
    build_request,
    build_stop,
    chunk_from_result,
    is_final_response,
    new_request_id,
    parse_url,
)
from .results import AudioChunk, Synthesis, VoiceBank

__all__ = ["DEFAULT_GRPC_URL", "STOP_WAIT_S", "AsyncTTSClient", "TTSClient", "send_stop"]

#: Seconds to wait for a broken stream's callback to report why it broke.
_CAUSE_WAIT = 5.0
#: Seconds a stopped stream may take to end after its in-band stop before it is cancelled (the server stops at its
#: next decoder call: milliseconds on a GPU, up to a second or two on a loaded CPU host).
STOP_WAIT_S = 10.0
#: Default seconds without any response before a stream counts as stalled: above the slowest first chunk seen under
#: overload (4-6 s at 64 streams on two CPU cores) by a wide margin.
STALL_TIMEOUT_S = 60.0
#: Default retries of a request that failed as unavailable before any audio, and the first backoff (doubling).
RETRIES = 2
RETRY_BACKOFF_S = 0.25


def _retriable(err: TTSError, produced: bool, attempt: int, retries: int) -> bool:
    return (isinstance(err, ServerUnavailableError) and not isinstance(err, ServerBusyError) and not produced
            and attempt < retries)


def _stalled(seconds: float | None) -> TTSTimeoutError:
    return TTSTimeoutError(f"no response from the server for {seconds:g} s (stall_timeout): the model may have "
                           "stopped; the stream was abandoned")


def send_stop(client: grpcclient.InferenceServerClient, request_id: str, *, model: str = TTS) -> None:
    """Send the in-band stop of request ``request_id`` on ``client``'s open stream (tritonclient's
    ``start_stream``), for code that drives tritonclient itself: the stream then gets the stopped request's FINAL
    and the stop's own (both flagged with ``enable_empty_final_response``); end it with ``stop_stream()``, not a
    cancel. Raises tritonclient's ``InferenceServerException`` when the stream is broken."""
    stop = build_stop(request_id)
    client.async_stream_infer(model, stop.infer_inputs(grpcclient), request_id=f"{request_id}-stop",
                              parameters=stop.parameters, enable_empty_final_response=True)


class TTSClient(Closing):
    """Blocking gRPC client of ``tts``; ``url`` is ``host:port`` or ``grpc://host:port``.

    ``timeout`` (seconds, None for no limit) bounds every call; a method's own ``timeout`` overrides
    it. ``stall_timeout`` (seconds, None for none) bounds the wait for each response of a stream, ``retries``
    the resends of a request that found the server unavailable before any audio (see the module docstring).
    Thread-safe: concurrent streams each get their own gRPC stream (tritonclient allows one per
    client object, so idle ones are pooled; their channels share one connection). Works under gevent
    (Locust) after ``grpc.experimental.gevent.init_gevent()``.
    """

    def __init__(self, url: str = DEFAULT_GRPC_URL, *, model: str = TTS, timeout: float | None = None,
                 stall_timeout: float | None = STALL_TIMEOUT_S, retries: int = RETRIES) -> None:
        self.url = parse_url(url, "grpc")
        self.model = model
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.retries = retries
        self._client = grpcclient.InferenceServerClient(self.url)
        self._idle: list[grpcclient.InferenceServerClient] = []
        self._lock = threading.Lock()
        self._closed = False

    def stream(self, text: str, **options: Unpack[RequestOptions]) -> Generator[AudioChunk, None, None]:
        """Synthesize ``text``, yielding audio chunks as the server sends them.

        Arguments are checked now (:class:`InvalidInputError`); the request is sent on the first
        ``next()``. Closing the generator early stops the request in-band (see the module docstring).
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
        attempt = 0
        while True:
            produced = False
            try:
                with contextlib.closing(self._attempt(request)) as chunks:
                    for chunk in chunks:
                        produced = True
                        yield chunk
                return
            except TTSError as err:
                if not _retriable(err, produced, attempt, self.retries):
                    raise
            time.sleep(RETRY_BACKOFF_S * 2**attempt)
            attempt += 1

    def _attempt(self, request: TTSRequest) -> Generator[AudioChunk, None, None]:
        timeout = self._timeout(request.timeout)
        with self._lock:
            if self._closed:
                raise TTSError("the client is closed")
            client = self._idle.pop() if self._idle else grpcclient.InferenceServerClient(self.url)
        responses: queue.SimpleQueue[tuple[Any, InferenceServerException | None]] = queue.SimpleQueue()
        request_id = new_request_id()
        final = sent = stalled = False
        try:
            start = time.perf_counter()
            with translated_errors():
                client.start_stream(lambda result, error: responses.put((result, error)), stream_timeout=timeout)
            try:
                client.async_stream_infer(
                    self.model, request.infer_inputs(grpcclient), outputs=request.requested_outputs(grpcclient),
                    request_id=request_id, enable_empty_final_response=True,
                )
                sent = True
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
                try:
                    result, error = responses.get(timeout=self.stall_timeout)
                except queue.Empty:
                    stalled = True
                    raise _stalled(self.stall_timeout) from None
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
            if sent and not final and not stalled:
                final = self._stop(client, responses, request_id)
            client.stop_stream(cancel_requests=not final)
            with self._lock:
                if not self._closed:
                    self._idle.append(client)
                    client = None
            if client is not None:
                client.close()

    def _stop(self, client: grpcclient.InferenceServerClient, responses: queue.SimpleQueue, request_id: str) -> bool:
        """Stop ``request_id`` in-band and read its stream to the end (both FINALs); False when that failed or took
        longer than :data:`STOP_WAIT_S` (the caller then cancels)."""
        try:
            send_stop(client, request_id, model=self.model)
        except InferenceServerException:
            return False
        deadline, finals = time.monotonic() + STOP_WAIT_S, 0
        while finals < 2:  # the stopped request's FINAL (after an error too) and the stop's own
            try:
                result, error = responses.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if error is None and is_final_response(result):
                finals += 1
        return True


class AsyncTTSClient:
    """asyncio twin of :class:`TTSClient`: the same methods, awaited, and ``stream`` yields with ``async for``.

    Concurrent streams share one channel. The gRPC channel is created on first use and belongs to
    that event loop: use one client per loop.
    """

    def __init__(self, url: str = DEFAULT_GRPC_URL, *, model: str = TTS, timeout: float | None = None,
                 stall_timeout: float | None = STALL_TIMEOUT_S, retries: int = RETRIES) -> None:
        self.url = parse_url(url, "grpc")
        self.model = model
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.retries = retries
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
        attempt = 0
        while True:
            produced = False
            try:
                async with contextlib.aclosing(self._attempt(request)) as chunks:
                    async for chunk in chunks:
                        produced = True
                        yield chunk
                return
            except TTSError as err:
                if not _retriable(err, produced, attempt, self.retries):
                    raise
            await asyncio.sleep(RETRY_BACKOFF_S * 2**attempt)
            attempt += 1

    def _request(self, request: TTSRequest, request_id: str) -> dict[str, Any]:
        return {"model_name": self.model, "inputs": request.infer_inputs(grpcclient_aio),
                "outputs": request.requested_outputs(grpcclient_aio), "request_id": request_id,
                "parameters": request.parameters}

    async def _attempt(self, request: TTSRequest) -> AsyncGenerator[AudioChunk, None]:
        timeout = self._timeout(request.timeout)
        request_id = new_request_id()

        async def requests() -> AsyncIterator[dict[str, Any]]:
            # One request, then the request side closes; Triton ends the stream after the final response.
            yield self._request(request, request_id)

        start = time.perf_counter()
        with translated_errors():
            responses = self._grpc().stream_infer(requests(), stream_timeout=timeout)
        received = responses.__aiter__()
        finished = stalled = False
        try:
            index = 0
            with translated_errors():
                while True:
                    try:
                        result, error = await asyncio.wait_for(anext(received), self.stall_timeout)
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        stalled = True
                        raise _stalled(self.stall_timeout) from None
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
            if not finished and (stalled or not await self._stop(received, request_id)):
                responses.cancel()

    async def _stop(self, received: AsyncIterator[Any], request_id: str) -> bool:
        """Stop ``request_id`` in-band (on a stream of its own) and read its stream to the end; False when that
        failed or took longer than :data:`STOP_WAIT_S` (the caller then cancels)."""
        async def stop_requests() -> AsyncIterator[dict[str, Any]]:
            yield self._request(build_stop(request_id), f"{request_id}-stop")

        async def drain() -> None:
            async for _ in self._grpc().stream_infer(stop_requests(), stream_timeout=STOP_WAIT_S):
                pass  # the stop's own FINAL carries no response
            async for _ in received:
                pass  # the stopped stream's last chunks, then its end

        try:
            await asyncio.wait_for(drain(), STOP_WAIT_S)
        except (Exception, asyncio.CancelledError):  # the stream is cancelled instead
            return False
        return True
