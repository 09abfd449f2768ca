"""The check of an ONNX graph's inputs and outputs against the tensor contract.

Used by the repository builder (before it copies a file in) and by the Triton ONNX Runtime model (when
it loads one); plain Python, importable without ONNX Runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tts_triton.core.contract import TensorSpec

if TYPE_CHECKING:
    import onnxruntime as ort


#: ONNX Runtime type string -> contract dtype name.
ORT_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(int32)": "int32",
              "tensor(int64)": "int64", "tensor(bool)": "bool", "tensor(string)": "bytes"}


def io_mismatches(
    session: ort.InferenceSession, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], *, batched: bool
) -> list[str]:
    """How the session's graph differs from the declared tensors; empty when it matches.

    Names must be equal as sets, dtypes equal, ranks equal (plus a leading dynamic batch axis when
    ``batched``); a graph dimension fixed to a number must equal the declared one (-1 declares a dynamic axis).
    """
    problems: list[str] = []
    sides = (("input", inputs, session.get_inputs()), ("output", outputs, session.get_outputs()))
    for kind, declared, graph_args in sides:
        graph = {arg.name: arg for arg in graph_args}
        expected = {spec.name: spec for spec in declared}
        if missing := sorted(expected.keys() - graph.keys()):
            problems.append(f"declared {kind}s {missing} are not in the graph")
        if extra := sorted(graph.keys() - expected.keys()):
            problems.append(f"graph {kind}s {extra} are not declared")
        for name in sorted(expected.keys() & graph.keys()):
            problems += _tensor_mismatches(kind, expected[name], graph[name], batched)
    return problems


def _tensor_mismatches(kind: str, spec: TensorSpec, arg: Any, batched: bool) -> list[str]:
    problems = []
    dtype = ORT_DTYPES.get(arg.type, arg.type)
    if dtype != spec.dtype:
        problems.append(f"{kind} {spec.name!r} is {dtype} in the graph, declared {spec.dtype}")
    shape = list(arg.shape)
    declared = ["batch", *spec.triton_dims] if batched else spec.triton_dims
    if batched and (not shape or isinstance(shape[0], int)):
        problems.append(f"{kind} {spec.name!r}: graph shape {shape} has no dynamic batch axis 0")
    dims = shape[1:] if batched else shape
    if len(dims) != len(spec.triton_dims) or any(
        isinstance(g, int) and g != d for g, d in zip(dims, spec.triton_dims, strict=True)
    ):
        problems.append(f"{kind} {spec.name!r} has shape {shape} in the graph, declared {declared}")
    return problems
