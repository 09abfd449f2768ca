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
import itertools
import queue
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from typing import Any, Unpack

import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcclient_aio
from tritonclient.utils import InferenceServerException

from tts_triton.core.contract import TTS
from tts_triton.core.endpoints import DEFAULT_GRPC_URL

from .closing import Closing
from .errors import (
    ServerBusyError,
    ServerUnavailableError,
    TTSError,
    TTSTimeoutError,
    ended_by_backend,
    translate_error,
    translated_errors,
)
from .request import RequestOptions, TTSRequest, build_request, build_stop, is_final_response, new_request_id, parse_url
from .results import AudioChunk, Synthesis, VoiceCatalog

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


def send_stop(client: grpcclient.InferenceServerClient, request_id: str, *, model: str = TTS) -> None:
    """Send the in-band stop of request ``request_id`` on ``client``'s open stream (tritonclient's
    ``start_stream``), for code that drives tritonclient itself: the stream then gets the stopped request's FINAL
    and the stop's own (both flagged with ``enable_empty_final_response``); end it with ``stop_stream()``, not a
    cancel. Raises tritonclient's ``InferenceServerException`` when the stream is broken."""
    stop = build_stop(request_id)
    client.async_stream_infer(model, stop.infer_inputs(grpcclient), request_id=f"{request_id}-stop",
                              parameters=stop.parameters, enable_empty_final_response=True)


class _Settings:
    """What both gRPC clients are configured with (each documented on :class:`TTSClient`)."""

    def __init__(self, url: str, *, model: str, timeout: float | None, stall_timeout: float | None,
                 retries: int) -> None:
        self.url = parse_url(url, "grpc")
        self.model = model
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.retries = retries

    def _timeout(self, timeout: float | None) -> float | None:
        """A call's own ``timeout``, else the client's."""
        return self.timeout if timeout is None else timeout

    def _retry_delay(self, err: TTSError, produced: bool, attempt: int) -> float:
        """Seconds to wait before resending a request whose ``attempt`` (0 first) failed with ``err``; raises
        ``err`` when the request may not be resent (see the module docstring)."""
        if (isinstance(err, ServerUnavailableError) and not isinstance(err, ServerBusyError) and not produced
                and attempt < self.retries):
            return RETRY_BACKOFF_S * 2**attempt
        raise err


class TTSClient(_Settings, Closing):
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
        super().__init__(url, model=model, timeout=timeout, stall_timeout=stall_timeout, retries=retries)
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

    def voices(self, *, timeout: float | None = None) -> VoiceCatalog:
        """The server's voice bank, read from the ``voice_bank`` parameter of the model's config."""
        with translated_errors():
            config = self._client.get_model_config(self.model, as_json=True, client_timeout=self._timeout(timeout))
        return VoiceCatalog.from_model_config(config)

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

    def _stream(self, request: TTSRequest) -> Generator[AudioChunk, None, None]:
        for attempt in itertools.count():
            produced = False
            try:
                with contextlib.closing(self._attempt(request)) as chunks:
                    for chunk in chunks:
                        produced = True
                        yield chunk
                return
            except TTSError as err:
                delay = self._retry_delay(err, produced, attempt)
            time.sleep(delay)

    def _attempt(self, request: TTSRequest) -> Generator[AudioChunk, None, None]:
        timeout = self._timeout(request.timeout)
        with self._lock:
            if self._closed:
                raise TTSError("the client is closed")
            client = self._idle.pop() if self._idle else grpcclient.InferenceServerClient(self.url)
        responses: queue.SimpleQueue[tuple[Any, InferenceServerException | None]] = queue.SimpleQueue()
        request_id = new_request_id()
        wait = _Waits(timeout, self.stall_timeout)
        end = "unsent"  # how the stream stands when the generator ends (see _finish)
        started = False  # a started stream must be stopped before the client object is pooled again
        try:
            start = time.perf_counter()
            with translated_errors():
                client.start_stream(lambda result, error: responses.put((result, error)), stream_timeout=wait.grpc)
            started = True
            try:
                client.async_stream_infer(
                    self.model, request.infer_inputs(grpcclient), outputs=request.requested_outputs(grpcclient),
                    request_id=request_id, enable_empty_final_response=True,
                )
            except InferenceServerException as e:
                # The stream broke before the request was queued (server unreachable); the stream
                # thread is handing the cause to the callback.
                try:
                    cause = responses.get(timeout=_CAUSE_WAIT)[1] or e
                except queue.Empty:
                    cause = e
                raise translate_error(cause) from cause
            end, index = "open", 0
            while end == "open":
                try:
                    result, error = responses.get(timeout=wait.next())
                except queue.Empty:
                    end = "stalled" if wait.stalled() else "open"
                    raise wait.error() from None
                if error is not None:
                    # a model's error comes as a message (its FINAL follows; not after one the backend ended the
                    # request with); a transport error has a status
                    if error.status() is not None:
                        end = "broken"
                    else:
                        end = "final" if ended_by_backend(error.message() or str(error)) else "errored"
                    raise translate_error(error) from error
                if is_final_response(result):
                    end = "final"
                chunk = request.chunk(result, index=index, elapsed=time.perf_counter() - start)
                if chunk is not None:
                    index += 1
                    yield chunk
        finally:
            if end != "unsent":
                client.stop_stream(cancel_requests=not self._finish(client, responses, request_id, end))
            elif started:  # the request never reached the server: nothing to finish
                client.stop_stream(cancel_requests=True)
            with self._lock:
                if not self._closed:
                    self._idle.append(client)
                    client = None
            if client is not None:
                client.close()

    def _finish(self, client: grpcclient.InferenceServerClient, responses: queue.SimpleQueue, request_id: str,
                end: str) -> bool:
        """Bring the stream to its end without a cancel: nothing to do after its FINAL; after a model's error, wait
        for the FINAL that follows; while it is still open, stop the request in-band and wait for both FINALs (the
        stopped request's and the stop's own). False when that is not possible (a stalled or broken stream) or
        takes longer than :data:`STOP_WAIT_S`: the caller then cancels."""
        if end == "final":
            return True
        if end not in ("open", "errored"):
            return False
        finals = 1
        if end == "open":
            try:
                send_stop(client, request_id, model=self.model)
            except InferenceServerException:
                return False
            finals = 2
        deadline = time.monotonic() + STOP_WAIT_S
        while finals:
            try:
                result, error = responses.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if error is None and is_final_response(result):
                finals -= 1
        return True


class _Reader:
    """Reads an aio response stream with a bound on each wait that leaves the read itself running (a cancelled read
    would cancel the gRPC call): ``next`` gives ``(result, error)``, ``(None, None)`` at the end of the stream,
    or None when ``timeout`` passed first."""

    def __init__(self, responses: Any) -> None:
        self._iterator = responses.__aiter__()
        self._pending: asyncio.Future[Any] | None = None

    async def next(self, timeout: float | None) -> tuple[Any, Any] | None:
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._read())
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return None
        pending, self._pending = self._pending, None
        return pending.result()

    async def _read(self) -> tuple[Any, Any]:
        try:
            return await anext(self._iterator)
        except StopAsyncIteration:
            return None, None

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()


class _Waits:
    """The waits of one stream: each response within ``stall_timeout``, the whole request within ``timeout`` (the
    client's own deadline, so that a late request is stopped in-band; gRPC's deadline, later, is the backstop)."""

    def __init__(self, timeout: float | None, stall_timeout: float | None) -> None:
        self.timeout, self.stall_timeout = timeout, stall_timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.grpc = None if timeout is None else timeout + 2 * STOP_WAIT_S

    def next(self) -> float | None:
        """Seconds to wait for the next response (None: no limit)."""
        left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        if self.stall_timeout is None:
            return left
        return self.stall_timeout if left is None else min(left, self.stall_timeout)

    def stalled(self) -> bool:
        """Whether the wait that just ran out was the stall timeout (not the request's deadline)."""
        return self.deadline is None or time.monotonic() < self.deadline

    def error(self) -> TTSTimeoutError:
        if self.stalled():
            return TTSTimeoutError(f"no response from the server for {self.stall_timeout:g} s (stall_timeout): the "
                                   "model may have stopped; the stream was abandoned")
        return TTSTimeoutError(f"the request did not complete within its timeout of {self.timeout:g} s; stopped")


class AsyncTTSClient(_Settings):
    """asyncio twin of :class:`TTSClient`: the same methods, awaited, and ``stream`` yields with ``async for``.

    Concurrent streams share one channel. The gRPC channel is created on first use and belongs to
    that event loop: use one client per loop.
    """

    def __init__(self, url: str = DEFAULT_GRPC_URL, *, model: str = TTS, timeout: float | None = None,
                 stall_timeout: float | None = STALL_TIMEOUT_S, retries: int = RETRIES) -> None:
        super().__init__(url, model=model, timeout=timeout, stall_timeout=stall_timeout, retries=retries)
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

    async def voices(self, *, timeout: float | None = None) -> VoiceCatalog:
        """The server's voice bank, read from the ``voice_bank`` parameter of the model's config."""
        with translated_errors():
            config = await self._grpc().get_model_config(
                self.model, as_json=True, client_timeout=self._timeout(timeout)
            )
        return VoiceCatalog.from_model_config(config)

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

    def _grpc(self) -> grpcclient_aio.InferenceServerClient:
        if self._client is None:
            self._client = grpcclient_aio.InferenceServerClient(self.url)
        return self._client

    async def _stream(self, request: TTSRequest) -> AsyncGenerator[AudioChunk, None]:
        for attempt in itertools.count():
            produced = False
            try:
                async with contextlib.aclosing(self._attempt(request)) as chunks:
                    async for chunk in chunks:
                        produced = True
                        yield chunk
                return
            except TTSError as err:
                delay = self._retry_delay(err, produced, attempt)
            await asyncio.sleep(delay)

    def _request(self, request: TTSRequest, request_id: str) -> dict[str, Any]:
        return {"model_name": self.model, "inputs": request.infer_inputs(grpcclient_aio),
                "outputs": request.requested_outputs(grpcclient_aio), "request_id": request_id,
                "parameters": request.parameters}

    async def _attempt(self, request: TTSRequest) -> AsyncGenerator[AudioChunk, None]:
        request_id = new_request_id()
        wait = _Waits(self._timeout(request.timeout), self.stall_timeout)

        async def requests() -> AsyncIterator[dict[str, Any]]:
            # One request, then the request side closes; Triton ends the stream after the final response.
            yield self._request(request, request_id)

        start = time.perf_counter()
        with translated_errors():
            responses = self._grpc().stream_infer(requests(), stream_timeout=wait.grpc)
        reader = _Reader(responses)
        end = "broken"  # how the stream stands when the generator ends: "final", "open", "errored", "stalled"
        try:
            index = 0
            with translated_errors():
                while True:
                    end = "broken"  # a transport error raises from the read
                    try:
                        item = await reader.next(wait.next())
                    except asyncio.CancelledError:  # the caller's task: end the stream in-band
                        end = "open"
                        raise
                    if item is None:
                        end = "stalled" if wait.stalled() else "open"
                        raise wait.error()
                    end = "open"
                    result, error = item
                    if result is None and error is None:
                        end = "final"
                        break
                    if error is not None:
                        end = "errored"  # the stream ends after it
                        raise translate_error(error) from error
                    chunk = request.chunk(result, index=index, elapsed=time.perf_counter() - start)
                    if chunk is not None:
                        index += 1
                        yield chunk
        finally:
            if end != "final" and not await self._finish(reader, request_id, end):
                reader.cancel()
                responses.cancel()

    async def _finish(self, reader: _Reader, request_id: str, end: str) -> bool:
        """Bring the stream to its end without a cancel (see :meth:`TTSClient._finish`); the stop goes on a stream
        of its own. False when that is not possible or takes longer than :data:`STOP_WAIT_S`."""
        if end not in ("open", "errored"):
            return False

        async def stop_requests() -> AsyncIterator[dict[str, Any]]:
            yield self._request(build_stop(request_id), f"{request_id}-stop")

        async def drain() -> None:
            if end == "open":
                async for _ in self._grpc().stream_infer(stop_requests(), stream_timeout=STOP_WAIT_S):
                    pass  # the stop's own FINAL carries no response
            while await reader.next(None) != (None, None):
                pass  # the stopped stream's last chunks, then its end

        try:
            await asyncio.wait_for(drain(), STOP_WAIT_S)
        except (Exception, asyncio.CancelledError):  # the stream is cancelled instead
            return False
        return True
