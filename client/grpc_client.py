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

Several servers: ``url`` may name several endpoints (a sequence, or comma-separated) and ``dns:///NAME:PORT``
(every address of the name, re-resolved); each stream goes to the endpoint with the fewest streams in flight,
and failing endpoints are ejected and probed back in the background (:mod:`~tts_triton.client.balancer`).

Stalls and retries: a stream that gets no response for ``stall_timeout`` seconds (a dead model process
leaves its requests unanswered) fails with :class:`TTSTimeoutError`. A request that failed before any audio
came is sent again, up to ``retries`` times: at once to an endpoint it has not tried yet when there is one
(after any failure but bad input and timeouts), else to the same one with exponential backoff, and then only
after :class:`ServerUnavailableError` (connection refused, server restarting, model not ready). Never a request
that produced audio (it fails as it came), nor one refused as busy (:class:`ServerBusyError`) with nowhere else
to go: retrying would add to the overload.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Sequence
from typing import Any, Unpack

import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcclient_aio
from tritonclient.utils import InferenceServerException

from tts_triton.core.contract import TTS
from tts_triton.core.endpoints import DEFAULT_GRPC_URL

from .balancer import Balancer, Endpoint
from .closing import Closing
from .errors import (
    InvalidInputError,
    ServerBusyError,
    ServerUnavailableError,
    TTSError,
    TTSTimeoutError,
    refusal_error,
    refused,
    translate_error,
    translated_errors,
)
from .request import RequestOptions, TTSRequest, build_request, build_stop, is_final_response, new_request_id
from .results import AudioChunk, Synthesis, VoiceCatalog

__all__ = ["DEFAULT_GRPC_URL", "STOP_WAIT_S", "AsyncTTSClient", "TTSClient", "send_stop"]

#: Seconds to wait for a broken stream's callback to report why it broke.
_CAUSE_WAIT = 5.0
#: Seconds a stopped stream may take to end after its in-band stop before it is cancelled (the server stops at its
#: next decoder call: milliseconds on a GPU, up to a second or two on a loaded CPU host).
STOP_WAIT_S = 10.0
#: Default seconds without any response before a stream counts as stalled: far above the slowest first chunk of an
#: overloaded server (seconds on a CPU host), yet a bound on a dead worker, which answers nothing.
STALL_TIMEOUT_S = 60.0
#: Default retries of a request that failed as unavailable before any audio, and the first backoff (doubling).
RETRIES = 2
RETRY_BACKOFF_S = 0.25
#: Seconds between two rounds of the background prober (probes due, DNS due), and one probe's limit.
PROBE_TICK_S = 0.25
PROBE_TIMEOUT_S = 2.0


def send_stop(client: grpcclient.InferenceServerClient, request_id: str, *, model: str = TTS) -> None:
    """Send the in-band stop of request ``request_id`` on ``client``'s open stream (tritonclient's
    ``start_stream``), for code that drives tritonclient itself: the stream then gets the stopped request's FINAL
    and the stop's own (both flagged with ``enable_empty_final_response``); end it with ``stop_stream()``, not a
    cancel. Raises tritonclient's ``InferenceServerException`` when the stream is broken."""
    stop = build_stop(request_id)
    client.async_stream_infer(model, stop.infer_inputs(grpcclient), request_id=f"{request_id}-stop",
                              parameters=stop.parameters, enable_empty_final_response=True)


class _Settings:
    """What both gRPC clients are configured with (each documented on :class:`TTSClient`), and the retry rule."""

    def __init__(self, url: str | Sequence[str], *, model: str, timeout: float | None, stall_timeout: float | None,
                 retries: int) -> None:
        self.balancer = Balancer(url)
        self.url = ",".join(self.balancer.targets)
        self.model = model
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.retries = retries

    @property
    def _probing(self) -> bool:
        """Whether a background prober is worth running: more than one endpoint, or a name to re-resolve."""
        return len(self.balancer.targets) > 1 or self.balancer.dynamic

    def _timeout(self, timeout: float | None) -> float | None:
        """A call's own ``timeout``, else the client's."""
        return self.timeout if timeout is None else timeout

    def _pick(self, tried: list[Endpoint]) -> Endpoint:
        """The endpoint of a request's next attempt: one it has not tried if any, else the best one."""
        endpoint = self.balancer.pick(tried) or self.balancer.pick()
        if endpoint is None:
            raise ServerUnavailableError(f"{self.url}: no address to send to (the name resolved to none)")
        return endpoint

    def _retry_delay(self, err: TTSError, produced: bool, tried: list[Endpoint]) -> float:
        """Seconds to wait before resending a request that failed with ``err`` on ``tried[-1]`` after trying
        ``tried``; raises ``err`` when it may not be resent (see the module docstring)."""
        attempt = len(tried) - 1
        if produced or attempt >= self.retries or isinstance(err, InvalidInputError | TTSTimeoutError):
            raise err
        if self.balancer.untried(tried):
            self.balancer.retried(tried[-1])
            return 0.0
        if isinstance(err, ServerUnavailableError) and not isinstance(err, ServerBusyError):
            self.balancer.retried(tried[-1])
            return RETRY_BACKOFF_S * 2**attempt
        raise err


class TTSClient(_Settings, Closing):
    """Blocking gRPC client of ``tts``; ``url`` is ``host:port``, ``grpc://host:port`` or ``dns:///NAME:PORT``, or
    several of them (a sequence, or comma-separated), balanced by :attr:`balancer` (see the module docstring).

    ``timeout`` (seconds, None for no limit) bounds every call; a method's own ``timeout`` overrides
    it. ``stall_timeout`` (seconds, None for none) bounds the wait for each response of a stream, ``retries``
    the resends of a request that found the server unavailable before any audio (see the module docstring).
    Thread-safe: concurrent streams each get their own gRPC stream (tritonclient allows one per
    client object, so idle ones are pooled; their channels share one connection). Works under gevent
    (Locust) after ``grpc.experimental.gevent.init_gevent()``.
    """

    def __init__(self, url: str | Sequence[str] = DEFAULT_GRPC_URL, *, model: str = TTS,
                 timeout: float | None = None, stall_timeout: float | None = STALL_TIMEOUT_S,
                 retries: int = RETRIES) -> None:
        super().__init__(url, model=model, timeout=timeout, stall_timeout=stall_timeout, retries=retries)
        self._clients: dict[str, grpcclient.InferenceServerClient] = {}  # per address, for calls other than streams
        self._idle: dict[str, list[grpcclient.InferenceServerClient]] = {}  # per address, pooled stream clients
        self._lock = threading.Lock()
        self._closed = False
        self._stop_probing = threading.Event()
        self._prober: threading.Thread | None = None
        if self._probing:
            self._prober = threading.Thread(target=self._probe_loop, name="tts-client-prober", daemon=True)
            self._prober.start()

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
        """The server's voice bank, read from the ``voice_bank`` parameter of the model's config (from the best
        endpoint that answers)."""
        error: TTSError = ServerUnavailableError(f"{self.url}: no address to ask")
        for endpoint in self.balancer.ranked():
            try:
                with translated_errors():
                    config = self._control(endpoint.address).get_model_config(
                        self.model, as_json=True, client_timeout=self._timeout(timeout))
                return VoiceCatalog.from_model_config(config)
            except ServerUnavailableError as err:
                error = err
        raise error

    def is_ready(self, *, timeout: float | None = None) -> bool:
        """True when an endpoint is reachable and its model ready (each endpoint's answer updates the balancer);
        never raises."""
        answers = [(endpoint, self._ready(endpoint.address, self._timeout(timeout)))
                   for endpoint in self.balancer.endpoints()]
        for endpoint, ready in answers:
            self.balancer.probed(endpoint, ready)
        return any(ready for _, ready in answers)

    def close(self) -> None:
        """Release the connections; streams still open are closed when they finish. Idempotent."""
        self._stop_probing.set()
        with self._lock:
            self._closed = True
            clients = [*self._clients.values(), *(c for idle in self._idle.values() for c in idle)]
            self._clients, self._idle = {}, {}
        for client in clients:
            client.close()
        if self._prober is not None and self._prober is not threading.current_thread():
            self._prober.join(timeout=PROBE_TIMEOUT_S + 1)

    def _control(self, address: str) -> grpcclient.InferenceServerClient:
        """The client object of ``address`` for calls other than streams."""
        with self._lock:
            if self._closed:
                raise TTSError("the client is closed")
            if address not in self._clients:
                self._clients[address] = grpcclient.InferenceServerClient(address)
            return self._clients[address]

    def _ready(self, address: str, timeout: float | None) -> bool:
        try:
            client = self._control(address)
            return bool(client.is_server_ready(client_timeout=timeout)
                        and client.is_model_ready(self.model, client_timeout=timeout))
        except (InferenceServerException, TTSError):
            return False

    def _model_ready(self, address: str) -> bool:
        """Whether ``address`` says the model is ready (one call; False when it does not answer)."""
        try:
            return bool(self._control(address).is_model_ready(self.model, client_timeout=PROBE_TIMEOUT_S))
        except (InferenceServerException, TTSError):
            return False

    def _probe_loop(self) -> None:
        """The background prober: ejected endpoints probed when due, ``dns:///`` names resolved when due."""
        while not self._stop_probing.wait(PROBE_TICK_S):
            self.balancer.refresh()
            for endpoint in self.balancer.due_probes():
                self.balancer.probed(endpoint, self._ready(endpoint.address, PROBE_TIMEOUT_S))

    def _stream(self, request: TTSRequest) -> Generator[AudioChunk, None, None]:
        tried: list[Endpoint] = []
        while True:
            endpoint = self._pick(tried)
            tried.append(endpoint)
            produced, error = False, None
            try:
                with contextlib.closing(self._attempt(request, endpoint.address)) as chunks:
                    for chunk in chunks:
                        produced = True
                        yield chunk
                return
            except TTSError as err:
                error = err
            finally:
                self.balancer.done(endpoint, error)
            time.sleep(self._retry_delay(error, produced, tried))

    def _attempt(self, request: TTSRequest, address: str) -> Generator[AudioChunk, None, None]:
        timeout = self._timeout(request.timeout)
        with self._lock:
            if self._closed:
                raise TTSError("the client is closed")
            idle = self._idle.setdefault(address, [])
            client = idle.pop() if idle else grpcclient.InferenceServerClient(address)
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
                    request_id=request_id, enable_empty_final_response=True, parameters=request.parameters,
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
                    # a model's error comes as a marked message, its FINAL after it; a refusal as an unmarked one,
                    # the request's end; a transport error has a status
                    if refused(error):
                        end = "final"
                        raise refusal_error(error, self._model_ready(address)) from error
                    end = "broken" if error.status() is not None else "errored"
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
                    self._idle.setdefault(address, []).append(client)
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

    Concurrent streams to one endpoint share its channel. The channels (and the background prober, with several
    endpoints) are created on first use and belong to that event loop: use one client per loop.
    """

    def __init__(self, url: str | Sequence[str] = DEFAULT_GRPC_URL, *, model: str = TTS,
                 timeout: float | None = None, stall_timeout: float | None = STALL_TIMEOUT_S,
                 retries: int = RETRIES) -> None:
        super().__init__(url, model=model, timeout=timeout, stall_timeout=stall_timeout, retries=retries)
        self._clients: dict[str, grpcclient_aio.InferenceServerClient] = {}
        self._prober: asyncio.Task[None] | None = None

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
        """The server's voice bank, read from the ``voice_bank`` parameter of the model's config (from the best
        endpoint that answers)."""
        error: TTSError = ServerUnavailableError(f"{self.url}: no address to ask")
        for endpoint in self.balancer.ranked():
            try:
                with translated_errors():
                    config = await self._grpc(endpoint.address).get_model_config(
                        self.model, as_json=True, client_timeout=self._timeout(timeout))
                return VoiceCatalog.from_model_config(config)
            except ServerUnavailableError as err:
                error = err
        raise error

    async def is_ready(self, *, timeout: float | None = None) -> bool:
        """True when an endpoint is reachable and its model ready (each endpoint's answer updates the balancer);
        never raises."""
        endpoints = self.balancer.endpoints()
        answers = await asyncio.gather(*(self._ready(e.address, self._timeout(timeout)) for e in endpoints))
        for endpoint, ready in zip(endpoints, answers, strict=True):
            self.balancer.probed(endpoint, ready)
        return any(answers)

    async def close(self) -> None:
        """Close the channels, cancelling streams still open. Idempotent."""
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
            self._prober = None
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    async def __aenter__(self) -> AsyncTTSClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _grpc(self, address: str) -> grpcclient_aio.InferenceServerClient:
        if self._prober is None and self._probing:
            self._prober = asyncio.get_running_loop().create_task(self._probe_loop(), name="tts-client-prober")
        if address not in self._clients:
            self._clients[address] = grpcclient_aio.InferenceServerClient(address)
        return self._clients[address]

    async def _ready(self, address: str, timeout: float | None) -> bool:
        try:
            client = self._grpc(address)
            return bool(await client.is_server_ready(client_timeout=timeout)
                        and await client.is_model_ready(self.model, client_timeout=timeout))
        except InferenceServerException:
            return False

    async def _model_ready(self, address: str) -> bool:
        """Whether ``address`` says the model is ready (one call; False when it does not answer)."""
        try:
            return bool(await self._grpc(address).is_model_ready(self.model, client_timeout=PROBE_TIMEOUT_S))
        except InferenceServerException:
            return False

    async def _probe_loop(self) -> None:
        """The background prober: ejected endpoints probed when due, ``dns:///`` names resolved when due."""
        while True:
            await asyncio.sleep(PROBE_TICK_S)
            if self.balancer.dynamic:
                await asyncio.to_thread(self.balancer.refresh)
            due = self.balancer.due_probes()
            answers = await asyncio.gather(*(self._ready(e.address, PROBE_TIMEOUT_S) for e in due))
            for endpoint, ready in zip(due, answers, strict=True):
                self.balancer.probed(endpoint, ready)

    async def _stream(self, request: TTSRequest) -> AsyncGenerator[AudioChunk, None]:
        tried: list[Endpoint] = []
        while True:
            endpoint = self._pick(tried)
            tried.append(endpoint)
            produced, error = False, None
            try:
                async with contextlib.aclosing(self._attempt(request, endpoint.address)) as chunks:
                    async for chunk in chunks:
                        produced = True
                        yield chunk
                return
            except TTSError as err:
                error = err
            finally:
                self.balancer.done(endpoint, error)
            await asyncio.sleep(self._retry_delay(error, produced, tried))

    def _request(self, request: TTSRequest, request_id: str) -> dict[str, Any]:
        return {"model_name": self.model, "inputs": request.infer_inputs(grpcclient_aio),
                "outputs": request.requested_outputs(grpcclient_aio), "request_id": request_id,
                "parameters": request.parameters}

    async def _attempt(self, request: TTSRequest, address: str) -> AsyncGenerator[AudioChunk, None]:
        request_id = new_request_id()
        wait = _Waits(self._timeout(request.timeout), self.stall_timeout)

        async def requests() -> AsyncIterator[dict[str, Any]]:
            # One request, then the request side closes; Triton ends the stream after the final response.
            yield self._request(request, request_id)

        start = time.perf_counter()
        with translated_errors():
            responses = self._grpc(address).stream_infer(requests(), stream_timeout=wait.grpc)
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
                        if refused(error):
                            raise refusal_error(error, await self._model_ready(address)) from error
                        raise translate_error(error) from error
                    chunk = request.chunk(result, index=index, elapsed=time.perf_counter() - start)
                    if chunk is not None:
                        index += 1
                        yield chunk
        finally:
            if end != "final" and not await self._finish(reader, request_id, end, address):
                reader.cancel()
                responses.cancel()

    async def _finish(self, reader: _Reader, request_id: str, end: str, address: str) -> bool:
        """Bring the stream to its end without a cancel (see :meth:`TTSClient._finish`); the stop goes on a stream
        of its own. False when that is not possible or takes longer than :data:`STOP_WAIT_S`."""
        if end not in ("open", "errored"):
            return False

        async def stop_requests() -> AsyncIterator[dict[str, Any]]:
            yield self._request(build_stop(request_id), f"{request_id}-stop")

        async def drain() -> None:
            if end == "open":
                async for _ in self._grpc(address).stream_infer(stop_requests(), stream_timeout=STOP_WAIT_S):
                    pass  # the stop's own FINAL carries no response
            while await reader.next(None) != (None, None):
                pass  # the stopped stream's last chunks, then its end

        try:
            await asyncio.wait_for(drain(), STOP_WAIT_S)
        except (Exception, asyncio.CancelledError):  # the stream is cancelled instead
            return False
        return True
