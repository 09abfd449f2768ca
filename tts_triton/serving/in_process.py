"""In-process :class:`~tts_triton.serving.pipeline.InferBackend` implementations.

``TorchBackend`` runs the PyTorch stages (the reference synthesizer); ``OnnxBackend`` runs the
exported ONNX files with ONNX Runtime (to prove the export equal to PyTorch). The Triton BLS
backend lives in :mod:`tts_triton.triton.bls`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from tts_triton.core import contract
from tts_triton.core.config import ModelConfig


class TorchBackend:
    """Calls the stage modules of :meth:`Checkpoint.stages` directly (fp32, no grad) on ``device``.

    Inputs are moved to ``device`` and outputs come back as numpy arrays; the stages are moved there once,
    here. The default, ``cpu``, runs the modules as given.
    """

    def __init__(self, stages: dict[str, nn.Module], cfg: ModelConfig, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.stages = {name: stage.to(self.device) for name, stage in stages.items()}
        self.specs = contract.network_specs(cfg)

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        spec = self.specs[model]
        with torch.inference_mode():
            outputs = self.stages[model](*(torch.from_numpy(np.ascontiguousarray(inputs[n])).to(self.device)
                                           for n in spec.input_names))
            return {name: out.cpu().numpy() for name, out in zip(spec.output_names, outputs, strict=True)}


class OnnxBackend:
    """Runs ``<onnx_dir>/<model>.onnx`` with ONNX Runtime on the CPU."""

    def __init__(self, onnx_dir: Path, cfg: ModelConfig, threads: int = 0) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.specs = contract.network_specs(cfg)
        self.sessions = {
            name: ort.InferenceSession(str(Path(onnx_dir) / f"{name}.onnx"), options,
                                       providers=["CPUExecutionProvider"])
            for name in self.specs
        }

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        spec = self.specs[model]
        outputs = self.sessions[model].run(spec.output_names, {n: inputs[n] for n in spec.input_names})
        return dict(zip(spec.output_names, outputs, strict=True))
