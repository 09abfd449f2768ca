"""Triton Python-backend model that runs its version directory's ``model.onnx`` with ONNX Runtime on the CPU.

Generic over the network: the tensors are those the model config declares, checked against the ONNX
graph when the model loads. The requests of one dynamic batch whose dtypes and non-batch shapes agree
are concatenated along axis 0 and run as one ONNX Runtime call; the outputs are split back by each
request's batch size. A failed batch is retried request by request, so one bad request gets an error
response and the others still get their results. Input shapes other than those the BLS sends
(:class:`~tts_triton.model_instance.request_shapes.RequestShapes`) are rejected with INVALID_ARG before any input is
read.

Config parameters (string values; ONNX Runtime's defaults when absent), named as in Triton's
``onnxruntime`` backend: ``intra_op_thread_count``, ``inter_op_thread_count``.

The version directory's ``model.py`` only re-exports :class:`TritonPythonModel`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from tts_triton.core.layout import INTER_OP_THREADS, INTRA_OP_THREADS, ONNX_FILE
from tts_triton.core.onnx_io import io_mismatches
from tts_triton.engine.batching import Feed, batch_groups, merge, split
from tts_triton.model_instance.params import config_tensors, int_parameter
from tts_triton.model_instance.request_shapes import RequestShapes
from tts_triton.processes.memory import lift_file_size_limit
from tts_triton.triton.utils import error_response, read_inputs

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: for documentation and for tests of the pure helpers
    pb_utils = None


def run_batch(
    session: ort.InferenceSession, feeds: Sequence[Feed], output_names: Sequence[str]
) -> list[dict[str, Any]]:
    """Run ``feeds`` (one mapping per request, batch on axis 0) as one call; the outputs of each request."""
    results = session.run(list(output_names), merge(feeds))
    return split(dict(zip(output_names, results, strict=True)), feeds)


class TritonPythonModel:
    """Runs ``<model dir>/<version>/model.onnx`` with the CPU execution provider.

    Inputs and outputs: exactly the tensors of the model config, all required; with
    ``max_batch_size > 0`` axis 0 is the batch and the dynamic batcher's requests are run together.
    Each request gets the outputs it asked for (all of them when it named none).
    """

    def initialize(self, args: dict[str, str]) -> None:
        """Load the ONNX file and fail fast when its graph does not match the model config."""
        lift_file_size_limit()  # the server's cap is for the inputs it copies in, not this model's outputs
        config = json.loads(args["model_config"])
        self._name = args["model_name"]
        self._batched = config.get("max_batch_size", 0) > 0
        path = os.path.join(args["model_repository"], args["model_version"], ONNX_FILE)
        options = ort.SessionOptions()
        options.intra_op_num_threads = int_parameter(config, INTRA_OP_THREADS, 0)
        options.inter_op_num_threads = int_parameter(config, INTER_OP_THREADS, 0)
        # Several models share the cores: idle ONNX Runtime workers must sleep, not spin.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
        inputs, outputs = config_tensors(config, "input"), config_tensors(config, "output")
        if problems := io_mismatches(self._session, inputs, outputs, batched=self._batched):
            raise ValueError(f"model {self._name!r}: {path} does not match its config.pbtxt: " + "; ".join(problems))
        self._input_names = [t.name for t in inputs]
        self._shapes = RequestShapes(config)
        self._output_names = [t.name for t in outputs]

    def execute(self, requests: list[Any]) -> list[Any]:
        """One response per request, in order; a failing request gets an error response."""
        responses: list[Any] = [None] * len(requests)
        feeds: list[Feed] = []
        wanted: list[list[str]] = []
        accepted: list[int] = []
        for i, request in enumerate(requests):
            try:
                feeds.append(read_inputs(request, self._input_names, model=self._name, required=self._input_names,
                                         shapes=self._shapes))
            except Exception as exc:  # reported to that request's client; the batch goes on
                responses[i] = error_response(exc, self._name)
                continue
            accepted.append(i)
            wanted.append(list(request.requested_output_names()) or self._output_names)
        for group in batch_groups(feeds, batched=self._batched):
            names = [n for n in self._output_names if any(n in wanted[j] for j in group)]
            for j, result in zip(group, self._run([feeds[j] for j in group], names), strict=True):
                if isinstance(result, Exception):
                    responses[accepted[j]] = error_response(result, self._name)
                else:
                    tensors = [pb_utils.Tensor(n, np.ascontiguousarray(result[n])) for n in wanted[j]]
                    responses[accepted[j]] = pb_utils.InferenceResponse(output_tensors=tensors)
        return responses

    def finalize(self) -> None:
        """Release the ONNX Runtime session."""
        self._session = None

    def _run(self, feeds: list[Feed], output_names: list[str]) -> list[dict[str, Any] | Exception]:
        try:
            return run_batch(self._session, feeds, output_names)
        except Exception as exc:  # isolate the failing request: retry one by one
            if len(feeds) == 1:
                return [exc]
            return [self._run([feed], output_names)[0] for feed in feeds]
