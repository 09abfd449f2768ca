"""Scripted server answers for the client library's tests: Triton's responses and errors as tritonclient gives them."""

from __future__ import annotations

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

SR = 22050

UNKNOWN_MODEL = "Request for unknown model: 'tts' is not found"


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def infer_response(*, audio: np.ndarray | None = None, rate: int | None = SR, mel: np.ndarray | None = None,
                   final: bool | None = None) -> grpcclient.InferResult:
    """A real ``InferResult`` over a hand-built ``ModelInferResponse`` (raw tensor contents, as Triton sends)."""
    response = service_pb2.ModelInferResponse(model_name="tts")
    rates = None if audio is None or rate is None else np.array([rate], np.int32)
    for name, datatype, array in (("AUDIO", "FP32", audio), ("SAMPLE_RATE", "INT32", rates), ("MEL", "FP32", mel)):
        if array is not None:
            response.outputs.add(name=name, datatype=datatype, shape=list(array.shape))
            response.raw_output_contents.append(array.tobytes())
    if final is not None:
        response.parameters["triton_final_response"].bool_param = final
    return grpcclient.InferResult(response)
