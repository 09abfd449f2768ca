"""ONNX export: every network equals PyTorch, the chained ONNX synthesis equals the reference, and
every op is one TensorRT 10's ONNX parser supports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from conftest import SENTENCE_IDS
from onnx_ops import FORBIDDEN_OPS, TENSORRT_ONNX_OPS

from tts_triton.core import contract
from tts_triton.core.config import ModelConfig
from tts_triton.export.onnx_export import example_inputs
from tts_triton.models.checkpoint import Checkpoint
from tts_triton.serving.in_process import OnnxBackend
from tts_triton.serving.pipeline import Pipeline
from tts_triton.serving.voice import Voice

SENTENCES = [SENTENCE_IDS, [1, *range(40, 55), 2]]


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|: the error relative to the tensor's scale."""
    return float(np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-12))


@pytest.mark.parametrize("model", [contract.TEXT_ENCODER, contract.STYLE_ENCODER, contract.DECODER, contract.VOCODER])
def test_onnx_matches_pytorch(model: str, checkpoint: Checkpoint, onnx_dir: Path) -> None:
    ckpt = checkpoint
    spec = contract.network_specs(ckpt.config)[model]
    stage = ckpt.stages()[model]
    session = ort.InferenceSession(str(onnx_dir / f"{model}.onnx"), providers=["CPUExecutionProvider"])
    for batch in (1, 4):
        for i, length in enumerate((11, 64, 157)):
            sizes = {contract.TOKENS: length, contract.FRAMES: length // 2 + 3, contract.REF_FRAMES: length + 20}
            inputs = example_inputs(spec, batch=batch, sizes=sizes, seed=i)
            with torch.no_grad():
                expected = [t.numpy() for t in stage(*inputs.values())]
            actual = session.run(spec.output_names, {k: v.numpy() for k, v in inputs.items()})
            for name, a, e in zip(spec.output_names, actual, expected, strict=True):
                assert a.shape == e.shape, f"{model}.{name} batch={batch} len={length}"
                assert relative_error(a, e) <= 1e-4, f"{model}.{name} batch={batch} len={length}"


def test_exported_ops_are_tensorrt_parsable(onnx_dir: Path) -> None:
    paths = sorted(onnx_dir.glob("*.onnx"))
    assert {path.stem for path in paths} == set(contract.network_specs(ModelConfig()))
    for path in paths:
        ops = {node.op_type for node in onnx.load(str(path)).graph.node}
        assert not ops & FORBIDDEN_OPS, f"{path.name}: {ops & FORBIDDEN_OPS}"
        assert ops <= TENSORRT_ONNX_OPS, f"{path.name} uses ops outside the TensorRT list: {ops - TENSORRT_ONNX_OPS}"


def test_exported_graphs_have_contract_io(checkpoint: Checkpoint, onnx_dir: Path) -> None:
    specs = contract.network_specs(checkpoint.config)
    assert {path.stem for path in onnx_dir.glob("*.onnx")} == set(specs)
    for name, spec in specs.items():
        graph = onnx.load(str(onnx_dir / f"{name}.onnx")).graph
        assert [i.name for i in graph.input] == spec.input_names
        assert [o.name for o in graph.output] == spec.output_names
        for value, tensor in zip(graph.input, spec.inputs, strict=True):
            dims = value.type.tensor_type.shape.dim
            assert dims[0].dim_param == "batch"
            for d, expected in zip(dims[1:], tensor.dims, strict=True):
                assert (d.dim_param if isinstance(expected, str) else d.dim_value) == expected


def test_onnx_chain_equals_reference(checkpoint: Checkpoint, onnx_dir: Path, test_style: np.ndarray) -> None:
    ckpt, style = checkpoint, test_style
    sentences = SENTENCES
    reference = Voice(ckpt).pipeline()
    chained = Pipeline(OnnxBackend(onnx_dir, ckpt.config), ckpt.config)
    ref_audio, ref_mel = asyncio.run(reference.synthesize(sentences, style))
    audio, mel = asyncio.run(chained.synthesize(sentences, style))
    assert reference.stats[0].steps == ckpt.info["test_stop_step"] + 1 and not reference.stats[0].hit_max_steps
    for ref_stats, stats in zip(reference.stats, chained.stats, strict=True):
        assert stats.steps == ref_stats.steps and stats.frames == ref_stats.frames
    assert mel.shape == ref_mel.shape
    assert np.abs(mel - ref_mel).max() <= 1e-3
    assert audio.shape == ref_audio.shape
    snr = 10 * np.log10(np.sum(ref_audio**2) / max(np.sum((audio - ref_audio) ** 2), 1e-20))
    assert snr >= 40.0
