"""The client library's streams without a server: completion, in-band stop and its fallback, typed errors, retries
of refused or unavailable streams and stalls, sync and async, against scripted stand-ins for tritonclient."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from client_data import UNKNOWN_MODEL, infer_response
from tritonclient.utils import InferenceServerException

from tts_triton.client import (
    AsyncTTSClient,
    InvalidInputError,
    ServerUnavailableError,
    TTSClient,
    TTSError,
    TTSTimeoutError,
    grpc_client,
)
from tts_triton.client.errors import (
    ServerBusyError,
)
from tts_triton.core.contract import EMOTION, STOP_PARAMETER
from tts_triton.errors import BUSY, INVALID_INPUT, mark


class ScriptedGrpcClient:
    """Stands in for ``tritonclient.grpc.InferenceServerClient``: replays responses through the stream callback."""

    script: list[tuple[Any, Any]] = []
    instances: list[ScriptedGrpcClient] = []

    #: Scripts for the next requests, one per request (then :attr:`script` for every request).
    next_scripts: list[list[tuple[Any, Any]]] = []
    #: Whether an in-band stop gets its own FINAL.
    answers_stops = True
    #: What ``is_model_ready`` answers, and the models it was asked about.
    model_ready = True
    asked_ready: list[str] = []

    def __init__(self, url: str) -> None:
        self.url, self.stops, self.requests, self.closed = url, [], [], False
        ScriptedGrpcClient.instances.append(self)

    def start_stream(self, callback: Any, stream_timeout: float | None = None) -> None:
        self.callback, self.stream_timeout = callback, stream_timeout

    def async_stream_infer(self, model_name: str, inputs: list[Any], **kwargs: Any) -> None:
        self.requests.append((model_name, inputs, kwargs))
        if kwargs.get("parameters"):
            script = [(infer_response(final=True), None)] if self.answers_stops else []
        else:
            script = self.next_scripts.pop(0) if self.next_scripts else self.script
        for result, error in script:
            self.callback(result=result, error=error)

    def stop_stream(self, cancel_requests: bool = False) -> None:
        self.stops.append(cancel_requests)

    def is_model_ready(self, model_name: str, client_timeout: float | None = None) -> bool:
        ScriptedGrpcClient.asked_ready.append(model_name)
        return self.model_ready

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[ScriptedGrpcClient]]:
    monkeypatch.setattr(grpc_client.grpcclient, "InferenceServerClient", ScriptedGrpcClient)
    monkeypatch.setattr(grpc_client, "RETRY_BACKOFF_S", 0.0)
    monkeypatch.setattr(grpc_client, "STOP_WAIT_S", 0.2)
    ScriptedGrpcClient.instances, ScriptedGrpcClient.next_scripts, ScriptedGrpcClient.answers_stops = [], [], True
    ScriptedGrpcClient.model_ready, ScriptedGrpcClient.asked_ready = True, []
    yield ScriptedGrpcClient


def three_chunks_then_final() -> list[tuple[Any, Any]]:
    chunks = [(infer_response(audio=np.full(100, i, np.float32), final=False), None) for i in range(3)]
    return [*chunks, (infer_response(final=True), None)]


def test_stream_completes_gracefully_and_reuses_the_stream_client(scripted: type[ScriptedGrpcClient]) -> None:
    scripted.script = three_chunks_then_final()
    client = TTSClient("localhost:1", model="tts", timeout=7.0)
    chunks = list(client.stream("hi", voice="alice"))
    assert [c.index for c in chunks] == [0, 1, 2] and [c.audio[0] for c in chunks] == [0, 1, 2]
    assert all(0 <= a.elapsed <= b.elapsed for a, b in zip(chunks, chunks[1:], strict=False))
    stream_client = scripted.instances[0]  # the unary calls' client is made on first use
    model, inputs, kwargs = stream_client.requests[0]
    assert model == "tts" and {i.name() for i in inputs} == {"TEXT", "VOICE"}
    assert kwargs["enable_empty_final_response"] is True
    # the client's own deadline comes first (stopped in-band); gRPC's is the backstop
    assert stream_client.stream_timeout == 7.0 + 2 * grpc_client.STOP_WAIT_S and stream_client.stops == [False]
    synthesis = client.synthesize("again", timeout=2.0)
    assert synthesis.chunks == 3 and synthesis.audio.shape == (300,)
    assert len(scripted.instances) == 1 and stream_client.stream_timeout == 2.0 + 2 * grpc_client.STOP_WAIT_S
    client.close()
    assert all(c.closed for c in scripted.instances)
    with pytest.raises(TTSError, match="closed"):
        next(client.stream("after close"))


def test_closing_the_stream_early_stops_it_in_band(scripted: type[ScriptedGrpcClient]) -> None:
    scripted.script = three_chunks_then_final()
    with TTSClient("localhost:1") as client:
        for chunk in client.stream("hi"):
            assert chunk.index == 0
            break
        stream_client = scripted.instances[0]
        (_, _, first), (model, stop_inputs, stop) = stream_client.requests
        assert model == "tts" and [i.name() for i in stop_inputs] == ["TEXT"]
        assert stop["parameters"] == {STOP_PARAMETER: first["request_id"]} and stop["enable_empty_final_response"]
        assert stream_client.stops == [False], "ended without a gRPC cancel"


def test_a_stop_left_unanswered_falls_back_to_a_cancel(scripted: type[ScriptedGrpcClient]) -> None:
    scripted.script, scripted.answers_stops = three_chunks_then_final()[:2], False
    with TTSClient("localhost:1") as client, contextlib.closing(client.stream("hi")) as chunks:
        next(chunks)
    assert scripted.instances[0].stops == [True]


def test_stream_error_message_is_typed_and_waits_for_its_final(scripted: type[ScriptedGrpcClient]) -> None:
    first = (infer_response(audio=np.zeros(10, np.float32), final=False), None)
    error = (None, InferenceServerException(mark(INVALID_INPUT, "EMOTION: unknown emotion 'x'", EMOTION)))
    scripted.script = [first, error, (infer_response(final=True), None)]
    with TTSClient("localhost:1") as client:
        chunks = client.stream("hi", emotion="x")
        assert next(chunks).index == 0
        with pytest.raises(InvalidInputError, match="EMOTION") as info:
            next(chunks)
        assert info.value.message == "EMOTION: unknown emotion 'x'" and info.value.status is None
        assert scripted.instances[0].stops == [False] and len(scripted.instances[0].requests) == 1  # no stop sent


def test_unavailable_before_any_audio_is_retried_busy_and_started_ones_are_not(
        scripted: type[ScriptedGrpcClient]) -> None:
    refused = [(None, InferenceServerException("failed to connect to all addresses", status="StatusCode.UNAVAILABLE"))]
    scripted.next_scripts = [refused, refused]
    scripted.script = three_chunks_then_final()
    with TTSClient("localhost:1", retries=2) as client:
        assert client.synthesize("hi").chunks == 3
        assert len(scripted.instances[0].requests) == 3
        scripted.next_scripts = [refused] * 3
        with pytest.raises(ServerUnavailableError):
            client.synthesize("hi")
        refusal = mark(BUSY, "server busy: tts already runs 16 requests ... limit of 32")
        busy = [(None, InferenceServerException(refusal))]
        scripted.next_scripts = [busy]
        sent = len(scripted.instances[0].requests)
        with pytest.raises(ServerBusyError, match="limit of 32"):
            client.synthesize("hi")
        assert len(scripted.instances[0].requests) == sent + 1
        cut = [three_chunks_then_final()[0], refused[0]]
        scripted.next_scripts = [cut]
        sent = len(scripted.instances[0].requests)
        with pytest.raises(ServerUnavailableError):
            list(client.stream("hi"))
        assert len(scripted.instances[0].requests) == sent + 1, "a request that produced audio is never resent"


def test_a_refusal_ends_the_stream_and_is_resent_only_while_the_model_is_not_ready(
        scripted: type[ScriptedGrpcClient]) -> None:
    scripted.script, scripted.model_ready = [(None, InferenceServerException(UNKNOWN_MODEL))], False
    with TTSClient("localhost:1", retries=1) as client:
        with pytest.raises(ServerUnavailableError, match="unknown model"):
            client.synthesize("hi")
        stream_client = scripted.instances[0]
        assert len(stream_client.requests) == 2, "not ready: resent"
        assert stream_client.stops == [False, False], "no FINAL awaited, no stop, no cancel"
        scripted.model_ready = True
        with pytest.raises(TTSError, match="unknown model") as info:
            client.synthesize("hi")
        assert type(info.value) is TTSError and len(stream_client.requests) == 3, "ready: not resent"
    assert scripted.asked_ready == ["tts"] * 3


def test_a_stalled_stream_ends_with_a_timeout_error(scripted: type[ScriptedGrpcClient]) -> None:
    scripted.script = three_chunks_then_final()[:1]
    with TTSClient("localhost:1", stall_timeout=0.05) as client:
        with pytest.raises(TTSTimeoutError, match="stall_timeout"):
            list(client.stream("hi"))
        assert scripted.instances[0].stops == [True]
    scripted.script = three_chunks_then_final()[:1]
    with TTSClient("localhost:1", timeout=0.05, stall_timeout=None) as client:
        with pytest.raises(TTSTimeoutError, match="within its timeout"):
            list(client.stream("hi"))
        assert scripted.instances[-1].requests[-1][2]["parameters"], "a request past its timeout is stopped in-band"


class ScriptedAioCall:
    """Stands in for the response iterator of ``tritonclient.grpc.aio``'s ``stream_infer``."""

    def __init__(self, items: list[tuple[Any, Any]]) -> None:
        self.items, self.cancelled = list(items), False

    def __aiter__(self) -> ScriptedAioCall:
        return self

    async def __anext__(self) -> tuple[Any, Any]:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    def cancel(self) -> bool:
        self.cancelled = True
        return True


def test_async_stream_stops_in_band_on_aclose(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[ScriptedAioCall, float | None, Any]] = []

    class ScriptedAioClient:
        def __init__(self, url: str) -> None:
            pass

        def stream_infer(self, requests: Any, stream_timeout: float | None = None) -> ScriptedAioCall:
            call = ScriptedAioCall(three_chunks_then_final()[:3])  # aio: the stream just ends after the last
            calls.append((call, stream_timeout, requests))
            return call

    monkeypatch.setattr(grpc_client.grpcclient_aio, "InferenceServerClient", ScriptedAioClient)
    client = AsyncTTSClient("localhost:1", timeout=3.0)

    async def run() -> list[dict[str, Any]]:
        synthesis = await client.synthesize("hi")
        assert synthesis.chunks == 3
        async with contextlib.aclosing(client.stream("hi", timeout=1.0)) as chunks:
            async for _ in chunks:
                break
        return [await anext(requests) for _, _, requests in calls]

    sent = asyncio.run(run())
    backstop = 2 * grpc_client.STOP_WAIT_S
    assert [(call.cancelled, timeout) for call, timeout, _ in calls] == [
        (False, 3.0 + backstop), (False, 1.0 + backstop), (False, grpc_client.STOP_WAIT_S)]
    assert sent[2]["parameters"] == {STOP_PARAMETER: sent[1]["request_id"]}


def test_async_refusal_is_resent_only_while_the_model_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[ScriptedAioCall] = []
    answers, asked = iter([False, False, True]), []  # not ready for the first request (sent twice), then ready

    class ScriptedAioClient:
        def __init__(self, url: str) -> None:
            pass

        def stream_infer(self, requests: Any, stream_timeout: float | None = None) -> ScriptedAioCall:
            calls.append(ScriptedAioCall([(None, InferenceServerException(UNKNOWN_MODEL))]))
            return calls[-1]

        async def is_model_ready(self, model_name: str, client_timeout: float | None = None) -> bool:
            asked.append(model_name)
            return next(answers)

        async def close(self) -> None:
            pass

    monkeypatch.setattr(grpc_client.grpcclient_aio, "InferenceServerClient", ScriptedAioClient)
    monkeypatch.setattr(grpc_client, "RETRY_BACKOFF_S", 0.0)

    async def run() -> tuple[TTSError, TTSError]:
        async with AsyncTTSClient("localhost:1", retries=1) as client:
            with pytest.raises(ServerUnavailableError) as unavailable:
                await client.synthesize("hi")
            with pytest.raises(TTSError) as failed:
                await client.synthesize("hi")
        return unavailable.value, failed.value

    unavailable, failed = asyncio.run(run())
    assert unavailable.message == UNKNOWN_MODEL and type(failed) is TTSError
    assert asked == ["tts"] * 3 and len(calls) == 3, "resent once while not ready, not after"
    assert not any(call.cancelled for call in calls)
