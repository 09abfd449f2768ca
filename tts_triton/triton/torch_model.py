"""Triton Python-backend model running one network's PyTorch stage on a GPU (the ``torch-cuda`` target).

Generic over the network: the model's name picks the stage of the version directory's checkpoint
(``model.pt``, see :mod:`tts_triton.models.checkpoint`), built with the repository's ``model_config``. The
instance runs on the GPU Triton gives it (``KIND_GPU``; one instance per listed GPU) and captures a
CUDA graph for every batch bucket and axis size the decode loop sends before the model reports ready
(:class:`~tts_triton.engine.graphs.StageRunner`). Each ``execute`` checks every request's shapes
against :mod:`tts_triton.core.shapes` (anything else gets INVALID_ARG, before any work), runs the requests
that agree in shape as one padded call, and answers with CPU tensors (a GPU tensor returned across the
BLS boundary costs far more than the copy).

Metrics: :data:`PHASE_METRIC` (seconds of ``execute`` by model and phase) beside Triton's own, sent in batches
(:class:`~tts_triton.model_instance.metrics.MetricBatch`) within half a second.

Config parameters (strings): ``model_config`` (ModelConfig JSON), ``fp16`` (``"true"``: fp16 weights on a GPU;
the vocoder's mel match stays fp32), ``cuda_graphs`` (``"false"`` runs eagerly, for comparison),
``intra_op_thread_count`` (PyTorch's threads for an instance on the CPU), ``batch_budget`` (optional: most rows x
tokens or mel frames of one device call, see :class:`~tts_triton.engine.graphs.StageRunner`).

The version directory's ``model.py`` only re-exports :class:`TritonPythonModel`.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import torch

from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import PHASE_METRIC, network_specs
from tts_triton.core.layout import BATCH_BUDGET, CHECKPOINT_FILE, CUDA_GRAPHS, FP16, INTRA_OP_THREADS, MODEL_CONFIG
from tts_triton.engine.graphs import StageRunner
from tts_triton.model_instance.metrics import MetricBatch
from tts_triton.model_instance.params import config_tensors, int_parameter, parameters
from tts_triton.model_instance.request_shapes import RequestShapes
from tts_triton.models.checkpoint import load_checkpoint
from tts_triton.processes.memory import lift_file_size_limit
from tts_triton.triton.utils import error_response, read_inputs

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: for documentation and for tests of the pure helpers
    pb_utils = None

#: The phases of :data:`~tts_triton.core.contract.PHASE_METRIC`: where a network call's time goes inside the
#: model. Triton's own ``compute_infer`` minus their sum is the stub's hand-over.
PHASES = ("inputs", "run", "responses")
PHASE_DESCRIPTION = ("Seconds the network models' execute spent: inputs (reading and checking the requests), run "
                     "(merging, the device, splitting), responses (building them)")
#: cuBLAS workspace of a GPU instance: one 4 MiB block per stream. torch's default holds more GPU memory per
#: process (text encoder, decoder, vocoder alike) for the same graph replay times (docs/records/bench/history.md).
CUBLAS_WORKSPACE = ":4096:1"


def instance_device(args: dict[str, str]) -> torch.device:
    """The device Triton assigned this instance: ``cuda:<id>`` for KIND_GPU, else the CPU."""
    if args.get("model_instance_kind") == "GPU":
        return torch.device("cuda", int(args["model_instance_device_id"]))
    return torch.device("cpu")


class TritonPythonModel:
    """One network stage on one device; see the module docstring."""

    def initialize(self, args: dict[str, str]) -> None:
        """Build the stage, check it against the model config, capture its CUDA graphs (fail fast)."""
        lift_file_size_limit()  # the server's cap is for the inputs it copies in, not this model's outputs
        config = json.loads(args["model_config"])
        params = parameters(config)
        self._name = args["model_name"]
        cfg = ModelConfig.from_dict(json.loads(params[MODEL_CONFIG]))
        self._spec = network_specs(cfg)[self._name]
        declared = [t.name for t in config_tensors(config, "input")], [t.name for t in config_tensors(config, "output")]
        if declared != (self._spec.input_names, self._spec.output_names):
            raise ValueError(f"model {self._name!r}: config.pbtxt tensors {declared} differ from the contract")
        device = instance_device(args)
        if device.type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)  # read at the first cuBLAS call
            torch.cuda.set_device(device)
        else:  # on a host shared with the other models' processes
            torch.set_num_threads(int_parameter(config, INTRA_OP_THREADS, torch.get_num_threads()))
        torch.backends.cudnn.benchmark = False  # per-shape autotuning: seconds per new shape, GBs of workspace
        path = os.path.join(args["model_repository"], args["model_version"], CHECKPOINT_FILE)
        stage = load_checkpoint(path).stages(cfg)[self._name]
        self._shapes = RequestShapes(config)
        half = params.get(FP16) == "true" and device.type == "cuda"
        self._runner = StageRunner(stage, self._spec, device=device, half=half,
                                   max_batch_size=self._shapes.max_batch_size, axes=self._shapes.axes,
                                   batch_budget=int_parameter(config, BATCH_BUDGET, 0) or None)
        if device.type == "cuda" and params.get(CUDA_GRAPHS, "true") == "true":
            graphs = self._runner.warm_up()
            held = torch.cuda.memory_reserved(device) / 2**20
            pb_utils.Logger.log_info(f"{self._name}: {graphs} CUDA graphs on {device}; torch holds {held:.0f} MiB")
        self._family = pb_utils.MetricFamily(name=PHASE_METRIC, description=PHASE_DESCRIPTION,
                                             kind=pb_utils.MetricFamily.COUNTER)
        self._phases = {p: self._family.Metric(labels={"model": self._name, "phase": p}) for p in PHASES}
        self._metrics = MetricBatch()  # an update is a round trip to the server: not before the responses go

    def execute(self, requests: list[Any]) -> list[Any]:
        """One response per request, in order; a request with a bad shape gets INVALID_ARG alone."""
        began = time.perf_counter()
        responses: list[Any] = [None] * len(requests)
        feeds, accepted, wanted = [], [], []
        inputs = self._spec.input_names
        for i, request in enumerate(requests):
            try:
                feeds.append(read_inputs(request, inputs, model=self._name, required=inputs, shapes=self._shapes))
            except Exception as exc:  # that request is told; the batch goes on
                responses[i] = error_response(exc, self._name)
                continue
            accepted.append(i)
            wanted.append(list(request.requested_output_names()) or self._spec.output_names)
        read = time.perf_counter()
        try:
            results = self._runner.run(feeds, {name for names in wanted for name in names}) if feeds else []
        except Exception as exc:  # the whole batch failed on the device: every accepted request is told
            for i in accepted:
                responses[i] = error_response(exc, self._name)
            return responses
        ran = time.perf_counter()
        for i, names, result in zip(accepted, wanted, results, strict=True):
            tensors = [pb_utils.Tensor(name, np.ascontiguousarray(result[name])) for name in names]
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
        for phase, seconds in zip(PHASES, (read - began, ran - read, time.perf_counter() - ran), strict=True):
            self._metrics.add(self._phases[phase], seconds)
        return responses

    def finalize(self) -> None:
        """Release the graphs and the device memory they hold."""
        self._runner = None
        self._metrics.close()
        del self._phases  # a Metric must go before its MetricFamily
        del self._family
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
