"""Triton Python (BLS) model behind ``tts`` (decoupled, streaming) and ``tts_offline`` (one response).

Contract (see README "The tts contract"): inputs ``TEXT`` BYTES [1]; optional ``VOICE`` and
``EMOTION`` BYTES [1], or ``REFERENCE_AUDIO`` FP32 [-1] with ``REFERENCE_SAMPLE_RATE`` INT32 [1].
Outputs ``AUDIO`` FP32 [-1] and ``SAMPLE_RATE`` INT32 [1] per streamed chunk (``tts``) or once
(``tts_offline``); ``MEL`` FP32 [-1, n_mels] (decoder frames) only when the client requests it.
Bad input gets an INVALID_ARG error whose message names the input. On ``tts`` every request ends
with the FINAL flag, on errors and cancellation too.

Config parameters: ``model_config`` (ModelConfig JSON), ``voice_bank`` (VoiceBank JSON).

This module is a thin adapter: request handling lives in :mod:`tts_triton.serving.service`, the
decode loop in :mod:`tts_triton.serving.pipeline`; here are only the Triton calls.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from tts_triton import audio, contract
from tts_triton.config import ModelConfig
from tts_triton.errors import InvalidInput
from tts_triton.serving.pipeline import Cancelled, Chunk
from tts_triton.serving.service import TTSService, parse_request
from tts_triton.triton.utils import parameters
from tts_triton.voices import VoiceBank


class BlsBackend:
    """:class:`~tts_triton.serving.pipeline.InferBackend` over BLS calls to the other models (CPU tensors)."""

    def __init__(self, cfg: ModelConfig) -> None:
        specs = {**contract.network_specs(cfg), contract.ENCODE: contract.encode_spec(cfg)}
        self.outputs = {name: spec.output_names for name, spec in specs.items()}

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


def request_inputs(request: Any, spec: contract.ModelSpec) -> dict[str, np.ndarray | None]:
    """The request's input tensors by name (None for absent optional inputs)."""
    out = {}
    for t in spec.inputs:
        tensor = pb_utils.get_input_tensor_by_name(request, t.name)
        out[t.name] = None if tensor is None else tensor.as_numpy()
    return out


class TritonPythonModel:
    """See the module docstring."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = parameters(config)
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.cfg = ModelConfig.from_dict(json.loads(params["model_config"]))
        self.spec = contract.tts_spec(self.cfg, config["name"])
        self.service = TTSService(self.cfg, VoiceBank.from_json(params["voice_bank"]))
        self.backend = BlsBackend(self.cfg)
        self.logger = pb_utils.Logger
        # Open requests: a scaling signal that rises with load even though the async BLS queues nothing.
        self.metric_family = pb_utils.MetricFamily(
            name="tts_active_requests", description="Synthesis requests in progress", kind=pb_utils.MetricFamily.GAUGE)
        self.active = self.metric_family.Metric(labels={"model": config["name"]})

    def finalize(self) -> None:
        del self.active  # a Metric must go before its MetricFamily
        del self.metric_family

    async def execute(self, requests: list[Any]) -> list[Any] | None:
        if self.decoupled:  # runs in the background: the next execute starts while these stream
            await asyncio.gather(*(self.stream(r) for r in requests))
            return None
        return list(await asyncio.gather(*(self.offline(r) for r in requests)))

    def chunk_response(self, chunk_audio: np.ndarray, mel: np.ndarray | None) -> Any:
        tensors = [pb_utils.Tensor("AUDIO", chunk_audio.astype(np.float32)),
                   pb_utils.Tensor("SAMPLE_RATE", np.array([audio.SAMPLE_RATE], dtype=np.int32))]
        if mel is not None:
            tensors.append(pb_utils.Tensor("MEL", mel.astype(np.float32)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    async def chunks(self, request: Any) -> Any:
        self.active.increment(1)
        try:
            parsed = parse_request(request_inputs(request, self.spec))
            async for chunk in self.service.stream(parsed, self.backend, request.is_cancelled):
                yield chunk
        finally:
            self.active.increment(-1)

    async def stream(self, request: Any) -> None:
        sender = request.get_response_sender()
        want_mel = "MEL" in request.requested_output_names()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            async for chunk in self.chunks(request):
                sender.send(self.chunk_response(chunk.audio, chunk.mel if want_mel else None))
        except Cancelled:
            self.logger.log_info("tts: request cancelled by the client; stream closed")
        except Exception as err:  # every failure still ends the stream below
            sender.send(error_response(err))
        finally:
            sender.send(flags=final)

    async def offline(self, request: Any) -> Any:
        try:
            chunks: list[Chunk] = [c async for c in self.chunks(request)]
        except Exception as err:
            return error_response(err)
        whole = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        mel = np.concatenate([c.mel for c in chunks]) if chunks else np.zeros((0, self.cfg.n_mels), np.float32)
        return self.chunk_response(whole, mel if "MEL" in request.requested_output_names() else None)


def error_response(err: Exception) -> Any:
    """INVALID_ARG for bad input (message names the input), INTERNAL otherwise."""
    if isinstance(err, InvalidInput):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(err), pb_utils.TritonError.INVALID_ARG))
    pb_utils.Logger.log_error(f"tts: {type(err).__name__}: {err}")
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"synthesis failed: {err}",
                                                                 pb_utils.TritonError.INTERNAL))
