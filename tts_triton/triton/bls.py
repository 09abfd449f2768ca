"""Triton Python (BLS) model behind ``tts`` (decoupled, streaming) and ``tts_offline`` (one response).

Contract (see README "The tts contract"): inputs ``TEXT`` BYTES [1]; optional ``VOICE`` and
``EMOTION`` BYTES [1], or ``REFERENCE_AUDIO`` FP32 [-1] with ``REFERENCE_SAMPLE_RATE`` INT32 [1].
Outputs ``AUDIO`` FP32 [-1] and ``SAMPLE_RATE`` INT32 [1] per streamed chunk (``tts``) or once
(``tts_offline``); ``MEL`` FP32 [-1, n_mels] (decoder frames) only when the client requests it.
Bad input gets an INVALID_ARG error whose message names the input. Every request ends with the
FINAL flag, on errors and cancellation too (``tts_offline``: its one response carries it).

Concurrency: both models run one coroutine per request. ``tts`` has an async ``execute`` (Triton runs
it in the background); ``tts_offline`` is not decoupled, so Triton would wait for its ``execute``:
there it hands each request to an event loop of its own and answers through the response sender
(Triton >= 24.06), so that concurrent offline requests run side by side and share decoder batches.
Their network calls pass a :class:`~tts_triton.triton.utils.ProgressGate`: a short request is not
queued behind a long one.

A request stops early when the client cancels it (``is_cancelled()``: a gRPC cancel, deadline or closed
connection) or at its time limit: ``RequestLimits.max_request_seconds``, shortened by the request's own
``timeout`` parameter. Triton 2.51 does not tell a model that an HTTP client disconnected; the time
limit bounds that case. A stop at the time limit is an UNAVAILABLE error.

Metrics: ``tts_active_requests`` (gauge) and ``tts_requests_total`` (counter) by ``model`` and
``outcome`` (:data:`OUTCOMES`), beside Triton's own.

Config parameters: ``model_config`` (ModelConfig JSON), ``voice_bank`` (VoiceBank JSON), ``first_chunk_first``
(``"true"``: :attr:`~tts_triton.config.StreamingConfig.first_chunk_first` for ``tts``; ``tts_offline`` ignores it).

This module is a thin adapter: request handling lives in :mod:`tts_triton.serving.service`, the
decode loop in :mod:`tts_triton.serving.pipeline`; here are only the Triton calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from tts_triton import audio, contract
from tts_triton.config import LIMITS, STREAMING, ModelConfig
from tts_triton.errors import InvalidInput
from tts_triton.serving.pipeline import Cancelled, Chunk
from tts_triton.serving.service import TTSService, parse_request
from tts_triton.triton.utils import FIRST_CHUNK_FIRST, ProgressGate, parameters
from tts_triton.voices import VoiceBank


class BlsBackend:
    """:class:`~tts_triton.serving.pipeline.InferBackend` over BLS calls to the other models (CPU tensors);
    requests every output but :data:`~tts_triton.contract.DIAGNOSTIC_OUTPUTS`."""

    def __init__(self, cfg: ModelConfig) -> None:
        specs = {**contract.network_specs(cfg), contract.ENCODE: contract.encode_spec(cfg)}
        self.outputs = {name: [o for o in spec.output_names if o not in contract.DIAGNOSTIC_OUTPUTS]
                        for name, spec in specs.items()}

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        request = pb_utils.InferenceRequest(
            model_name=model,
            inputs=[pb_utils.Tensor(name, np.ascontiguousarray(value)) for name, value in inputs.items()],
            requested_output_names=self.outputs[model],
        )
        response = await request.async_exec()
        if response.has_error():
            raise RuntimeError(f"model {model!r} failed: {response.error().message()}")
        return {name: pb_utils.get_output_tensor_by_name(response, name).as_numpy() for name in self.outputs[model]}


class GatedBackend:
    """One request's view of a :class:`BlsBackend` whose calls wait for their turn at a :class:`ProgressGate`."""

    def __init__(self, backend: BlsBackend, gate: ProgressGate) -> None:
        self.backend = backend
        self.gate = gate

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        await self.gate.call(self)
        return await self.backend.infer(model, inputs)


def request_inputs(request: Any, spec: contract.ModelSpec) -> dict[str, np.ndarray | None]:
    """The request's input tensors by name (None for absent optional inputs)."""
    out = {}
    for t in spec.inputs:
        tensor = pb_utils.get_input_tensor_by_name(request, t.name)
        out[t.name] = None if tensor is None else tensor.as_numpy()
    return out


#: How a request ended, the ``outcome`` label of ``tts_requests_total``.
OUTCOMES = ("completed", "cancelled", "timed_out", "invalid_input", "failed")
#: Threads that wait on BLS calls for the offline loop (one per request in flight, at most).
OFFLINE_BLS_THREADS = 64
#: How many network calls a ``tts_offline`` request may run ahead of the least advanced one (ProgressGate).
OFFLINE_CALL_SLACK = 8
#: Seconds a ``tts_offline`` call waits at most for the requests behind it (ProgressGate).
OFFLINE_MAX_GATE_WAIT_S = 0.5


class TimedOut(Exception):
    """The request ran past its time limit; synthesis stopped."""


class Deadline:
    """When a request must stop: ``limit_s`` after it started, or sooner when its ``timeout`` (us) says so."""

    def __init__(self, request: Any, limit_s: float = LIMITS.max_request_seconds) -> None:
        timeout_us = request.timeout()
        self.seconds = min(limit_s, timeout_us / 1e6) if timeout_us else limit_s
        self.at = time.monotonic() + self.seconds

    def passed(self) -> bool:
        return time.monotonic() >= self.at


class TritonPythonModel:
    """See the module docstring."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = parameters(config)
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.cfg = ModelConfig.from_dict(json.loads(params["model_config"]))
        self.spec = contract.tts_spec(self.cfg, config["name"])
        first = self.decoupled and params.get(FIRST_CHUNK_FIRST) == "true"  # tts_offline sends no first chunk
        streaming = dataclasses.replace(STREAMING, first_chunk_first=first)
        self.service = TTSService(self.cfg, VoiceBank.from_json(params["voice_bank"]), streaming)
        self.service.warm_up()
        self.backend = BlsBackend(self.cfg)
        self.logger = pb_utils.Logger
        labels = {"model": config["name"]}
        # Open requests: a scaling signal that rises with load even though the async BLS queues nothing.
        self.active_family = pb_utils.MetricFamily(
            name="tts_active_requests", description="Synthesis requests in progress", kind=pb_utils.MetricFamily.GAUGE)
        self.active = self.active_family.Metric(labels=labels)
        self.outcome_family = pb_utils.MetricFamily(
            name="tts_requests_total", description="Synthesis requests by how they ended",
            kind=pb_utils.MetricFamily.COUNTER)
        self.outcomes = {o: self.outcome_family.Metric(labels={**labels, "outcome": o}) for o in OUTCOMES}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.gate: ProgressGate | None = None
        if not self.decoupled:
            self.gate = ProgressGate(OFFLINE_CALL_SLACK, OFFLINE_MAX_GATE_WAIT_S)
            self.loop = asyncio.new_event_loop()
            self.loop.set_default_executor(ThreadPoolExecutor(OFFLINE_BLS_THREADS, thread_name_prefix="bls"))
            self.loop_thread = threading.Thread(target=self.loop.run_forever, name="tts-offline", daemon=True)
            self.loop_thread.start()

    def finalize(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.loop_thread.join(timeout=5)
        del self.active, self.outcomes  # a Metric must go before its MetricFamily
        del self.active_family, self.outcome_family

    def execute(self, requests: list[Any]) -> Coroutine[Any, Any, None] | None:
        """``tts``: a coroutine, which Triton runs in the background. ``tts_offline``: None at once; each
        request is answered from the model's own loop."""
        if self.decoupled:
            return self.stream_all(requests)
        for request in requests:
            asyncio.run_coroutine_threadsafe(self.offline(request), self.loop)
        return None

    async def stream_all(self, requests: list[Any]) -> None:
        await asyncio.gather(*(self.stream(r) for r in requests))

    def chunk_response(self, chunk_audio: np.ndarray, mel: np.ndarray | None) -> Any:
        tensors = [pb_utils.Tensor("AUDIO", chunk_audio.astype(np.float32)),
                   pb_utils.Tensor("SAMPLE_RATE", np.array([audio.SAMPLE_RATE], dtype=np.int32))]
        if mel is not None:
            tensors.append(pb_utils.Tensor("MEL", mel.astype(np.float32)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    async def chunks(self, request: Any) -> AsyncIterator[Chunk]:
        """The request's audio chunks, counting its outcome. Raises InvalidInput, Cancelled (by the
        client), TimedOut or the failure."""
        self.active.increment(1)
        outcome = "failed"
        deadline = Deadline(request)
        backend: BlsBackend | GatedBackend = self.backend
        if self.gate is not None:
            backend = GatedBackend(self.backend, self.gate)
            self.gate.enter(backend)
        try:
            parsed = parse_request(request_inputs(request, self.spec))
            chunks = self.service.stream(parsed, backend, lambda: deadline.passed() or request.is_cancelled())
            try:
                async with contextlib.aclosing(chunks):
                    async for chunk in chunks:
                        yield chunk
            except Cancelled:
                if request.is_cancelled():
                    raise
                raise TimedOut(f"synthesis stopped at its time limit of {deadline.seconds:g} s") from None
            outcome = "completed"
        except InvalidInput:
            outcome = "invalid_input"
            raise
        except Cancelled:
            outcome = "cancelled"
            raise
        except TimedOut:
            outcome = "timed_out"
            raise
        finally:
            if isinstance(backend, GatedBackend):
                await backend.gate.leave(backend)
            self.active.increment(-1)
            self.outcomes[outcome].increment(1)

    async def stream(self, request: Any) -> None:
        sender = request.get_response_sender()
        want_mel = "MEL" in request.requested_output_names()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            async with contextlib.aclosing(self.chunks(request)) as chunks:
                async for chunk in chunks:
                    sender.send(self.chunk_response(chunk.audio, chunk.mel if want_mel else None))
        except Cancelled:
            self.logger.log_info("tts: request cancelled by the client; stream closed")
        except Exception as err:  # every failure still ends the stream below
            sender.send(error_response(err))
        finally:
            sender.send(flags=final)

    async def offline(self, request: Any) -> None:
        """Answer one ``tts_offline`` request through its response sender: one response, flagged FINAL."""
        sender = request.get_response_sender()
        try:
            response = await self.offline_response(request)
        except Exception as err:
            response = error_response(err)
        try:
            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception as err:  # nothing left to tell the client
            self.logger.log_error(f"tts_offline: could not send the response: {err}")

    async def offline_response(self, request: Any) -> Any:
        chunks: list[Chunk] = [c async for c in self.chunks(request)]
        whole = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        mel = np.concatenate([c.mel for c in chunks]) if chunks else np.zeros((0, self.cfg.n_mels), np.float32)
        return self.chunk_response(whole, mel if "MEL" in request.requested_output_names() else None)


def error_response(err: Exception) -> Any:
    """INVALID_ARG for bad input (message names the input), CANCELLED, UNAVAILABLE past the time limit,
    INTERNAL otherwise."""
    if isinstance(err, InvalidInput):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(err), pb_utils.TritonError.INVALID_ARG))
    if isinstance(err, Cancelled):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError("request cancelled by the client",
                                                                     pb_utils.TritonError.CANCELLED))
    if isinstance(err, TimedOut):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(err), pb_utils.TritonError.UNAVAILABLE))
    pb_utils.Logger.log_error(f"tts: {type(err).__name__}: {err}")
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"synthesis failed: {err}",
                                                                 pb_utils.TritonError.INTERNAL))
