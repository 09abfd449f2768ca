"""The ONNX operator sets that exported graphs are held to (tests/served/test_export.py, tests/model/test_vocos.py)."""

from __future__ import annotations

# Operators of the TensorRT 10 ONNX parser's support matrix (onnx-tensorrt, docs/operators.md, release
# 10.x), restricted to the ones a network of this kind can reasonably need. An op outside this list in
# an exported graph means the TensorRT target would fail to parse it.
TENSORRT_ONNX_OPS = {
    "Add", "Cast", "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Cos", "Div", "Equal",
    "Erf", "Exp", "Expand", "Flatten", "Gather", "Gemm", "Greater", "GRU", "Identity", "LayerNormalization",
    "LeakyRelu", "Log", "LSTM", "MatMul", "Mul", "Neg", "Pad", "Pow", "Range", "ReduceMean", "ReduceSum", "Relu",
    "Reshape", "Round", "Shape", "Sigmoid", "Sin", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tanh",
    "Transpose", "Unsqueeze", "Where",
}
# Ops TensorRT rejects or that signal a graph the export should not produce (data-dependent loops).
FORBIDDEN_OPS = {"Loop", "If", "Scan", "NonZero", "RandomUniform", "RandomNormal", "Dropout"}
