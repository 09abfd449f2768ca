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
from tts_triton.export.onnx_export import example_inputs, export_checkpoint

from tts_triton import contract
from tts_triton.checkpoint import Checkpoint, init_checkpoint
from tts_triton.serving.backends import OnnxBackend, TorchBackend
from tts_triton.serving.pipeline import Pipeline

# Operators of the TensorRT 10 ONNX parser's support matrix (onnx-tensorrt, docs/operators.md, release
# 10.x), restricted to the ones a network of this kind can reasonably need. An op outside this list in
# an exported graph means the TensorRT target would fail to parse it.
TENSORRT_ONNX_OPS = {
    "Add", "Cast", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Div", "Equal", "Erf",
    "Expand", "Flatten", "Gather", "Gemm", "GRU", "Identity", "LayerNormalization", "LeakyRelu", "LSTM",
    "MatMul", "Mul", "Neg", "Pow", "Range", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Shape", "Sigmoid",
    "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Transpose", "Unsqueeze", "Where",
}
# Ops TensorRT rejects or that signal a graph the export should not produce (data-dependent loops).
FORBIDDEN_OPS = {"Loop", "If", "Scan", "NonZero", "RandomUniform", "RandomNormal", "Dropout"}


SENTENCES = [[1, *range(20, 52), 2], [1, *range(40, 55), 2]]
STOP_STEP = 21


def gate_logits(ckpt: Checkpoint, ids: list[int], style: np.ndarray, steps: int) -> np.ndarray:
    """The decoder's stop logits over the first ``steps`` free-running steps."""
    stages = ckpt.stages()
    with torch.no_grad():
        phonemes = torch.tensor([ids], dtype=torch.int32)
        memory, processed = stages[contract.TEXT_ENCODER](phonemes, torch.ones(phonemes.shape))
        decoder = stages[contract.DECODER].decoder
        _, gate, _, _ = decoder.run(decoder.initial_state(memory), steps, memory, processed,
                                    torch.ones(phonemes.shape), torch.from_numpy(style)[None])
    return gate[0].numpy()


@pytest.fixture(scope="module")
def style() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(128).astype(np.float32) * 0.3


@pytest.fixture(scope="module")
def ckpt(style: np.ndarray) -> Checkpoint:
    """Seeded weights whose gate bias is shifted so that the first sentence stops near STOP_STEP.

    Untrained gates barely move, so without this the stop rule would fire at step 0 or never.
    """
    ckpt = init_checkpoint(seed=7)
    logits = gate_logits(ckpt, SENTENCES[0], style, STOP_STEP + 1)
    with torch.no_grad():
        ckpt.acoustic.decoder.gate.bias -= float(logits[STOP_STEP]) - 1e-6
    return ckpt


@pytest.fixture(scope="module")
def onnx_dir(ckpt: Checkpoint, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("onnx")
    export_checkpoint(ckpt, out, progress=False)
    return out


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|: the error relative to the tensor's scale."""
    return float(np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-12))


@pytest.mark.parametrize("model", [contract.TEXT_ENCODER, contract.STYLE_ENCODER, contract.DECODER, contract.VOCODER])
def test_onnx_matches_pytorch(model: str, ckpt: Checkpoint, onnx_dir: Path) -> None:
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
    for path in sorted(onnx_dir.glob("*.onnx")):
        ops = {node.op_type for node in onnx.load(str(path)).graph.node}
        assert not ops & FORBIDDEN_OPS, f"{path.name}: {ops & FORBIDDEN_OPS}"
        assert ops <= TENSORRT_ONNX_OPS, f"{path.name} uses ops outside the TensorRT list: {ops - TENSORRT_ONNX_OPS}"


def test_exported_graphs_have_contract_io(ckpt: Checkpoint, onnx_dir: Path) -> None:
    for name, spec in contract.network_specs(ckpt.config).items():
        graph = onnx.load(str(onnx_dir / f"{name}.onnx")).graph
        assert [i.name for i in graph.input] == spec.input_names
        assert [o.name for o in graph.output] == spec.output_names
        for value, tensor in zip(graph.input, spec.inputs, strict=True):
            dims = value.type.tensor_type.shape.dim
            assert dims[0].dim_param == "batch"
            for d, expected in zip(dims[1:], tensor.dims, strict=True):
                assert (d.dim_param if isinstance(expected, str) else d.dim_value) == expected


def test_onnx_chain_equals_reference_synthesizer(ckpt: Checkpoint, onnx_dir: Path, style: np.ndarray) -> None:
    sentences = SENTENCES
    reference = Pipeline(TorchBackend(ckpt.stages(), ckpt.config), ckpt.config)
    chained = Pipeline(OnnxBackend(onnx_dir, ckpt.config), ckpt.config)
    ref_audio, ref_mel = asyncio.run(reference.synthesize(sentences, style))
    audio, mel = asyncio.run(chained.synthesize(sentences, style))
    assert 2 < reference.stats[0].steps <= STOP_STEP + 1 and not reference.stats[0].hit_max_steps
    for ref_stats, stats in zip(reference.stats, chained.stats, strict=True):
        assert stats.steps == ref_stats.steps and stats.frames == ref_stats.frames
    assert mel.shape == ref_mel.shape
    assert np.abs(mel - ref_mel).max() <= 1e-3
    assert audio.shape == ref_audio.shape
    snr = 10 * np.log10(np.sum(ref_audio**2) / max(np.sum((audio - ref_audio) ** 2), 1e-20))
    assert snr >= 40.0
