"""Helpers shared by the Python-backend models; plain Python, importable outside Triton."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from tts_triton.contract import TRITON_DTYPES, ModelSpec, TensorSpec
from tts_triton.layout import (  # noqa: F401  (the adapters import the parameter names from here too)
    BATCH_BUDGET,
    FIRST_CHUNK_FIRST,
    INPUT_AXES,
    INTER_OP_THREADS,
    INTRA_OP_THREADS,
)
from tts_triton.shapes import AxisValues, axis_values, shape_problems

_NUMPY_DTYPES = {triton: numpy for numpy, triton in TRITON_DTYPES.items()}


def parameters(model_config: Mapping[str, Any]) -> dict[str, str]:
    """The string parameters of a model config (the parsed ``args["model_config"]`` JSON)."""
    return {key: value["string_value"] for key, value in model_config.get("parameters", {}).items()}


def int_parameter(model_config: Mapping[str, Any], key: str, default: int) -> int:
    """Parameter ``key`` as an int, ``default`` when absent; a non-integer value raises ``ValueError``."""
    value = parameters(model_config).get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        model = model_config.get("name")
        raise ValueError(f"model {model!r}: parameter {key!r} must be an integer, got {value!r}") from None


def config_tensors(model_config: Mapping[str, Any], kind: str) -> list[TensorSpec]:
    """The ``kind`` ("input" or "output") tensors a model config declares, as contract specs (batch excluded)."""
    return [
        TensorSpec(t["name"], _NUMPY_DTYPES[t["data_type"]], tuple(int(d) for d in t["dims"]), bool(t.get("optional")))
        for t in model_config.get(kind, [])
    ]


def input_axes_parameter(spec: ModelSpec) -> str:
    """The :data:`INPUT_AXES` parameter of a network's config: the contract's axis names of each input."""
    return json.dumps({t.name: [d if isinstance(d, str) else "" for d in t.dims] for t in spec.inputs})


class RequestShapes:
    """Checks a request's input shapes against those the BLS sends (:mod:`tts_triton.shapes`), before any
    input is read: a network model calls :meth:`problems` with ``tensor.shape()`` of each input and answers
    INVALID_ARG when it returns anything.

    Built from the model config: dims and ``max_batch_size`` as Triton has them, axis names from the
    :data:`INPUT_AXES` parameter (a missing or mismatching parameter raises ``ValueError``: fail at load).
    """

    def __init__(self, model_config: Mapping[str, Any], axes: Mapping[str, AxisValues] | None = None) -> None:
        name = model_config.get("name")
        try:
            names = json.loads(parameters(model_config)[INPUT_AXES])
        except (KeyError, json.JSONDecodeError) as err:
            raise ValueError(f"model {name!r}: parameter {INPUT_AXES!r} is missing or not JSON ({err}); the repository "
                             "predates it: rebuild it with `tts-triton build-repo --force`") from None
        self.max_batch_size = int(model_config.get("max_batch_size", 0))
        self.axes = dict(axes if axes is not None else axis_values())
        self.specs: dict[str, TensorSpec] = {}
        for t in config_tensors(model_config, "input"):
            axis_names = names.get(t.name)
            if axis_names is None or len(axis_names) != len(t.dims):
                raise ValueError(f"model {name!r}: {INPUT_AXES} does not name the {len(t.dims)} axes of {t.name!r}")
            dims = tuple(axis or dim for axis, dim in zip(axis_names, t.dims, strict=True))
            self.specs[t.name] = TensorSpec(t.name, t.dtype, dims, t.optional)

    def problems(self, shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
        """Why these input shapes (by input name, batch axis first when batched) are not ones the BLS
        sends: unknown inputs, sizes outside the spec, one axis with different sizes in two inputs."""
        batched = self.max_batch_size > 0
        problems: list[str] = []
        seen: dict[str, tuple[str, int]] = {}  # axis -> (first input with it, its size)
        for name, shape in shapes.items():
            spec = self.specs.get(name)
            if spec is None:
                problems.append(f"{name}: not an input of this model")
                continue
            found = shape_problems(spec, tuple(shape), self.axes, batched=batched, max_batch_size=self.max_batch_size)
            problems += found
            if found:
                continue
            sized = [("batch", shape[0])] if batched else []
            dims = shape[1:] if batched else shape
            sized += [(d, s) for d, s in zip(spec.dims, dims, strict=True) if isinstance(d, str)]
            for axis, size in sized:
                first, expected = seen.setdefault(axis, (name, size))
                if size != expected:
                    problems.append(f"{name}: {axis} = {size} differs from {first}'s {expected}")
        return problems


class ProgressGate:
    """Least-attained-service order for the network calls of concurrent requests on one event loop.

    A request may make its next call only while it is at most ``slack`` calls ahead of the least advanced
    request in progress: a short request sent while a long one runs is not queued behind the long one's
    calls, and requests of equal progress still run (and batch) together. A request held back goes anyway
    after ``max_wait`` seconds, so a steady stream of new requests slows a long one but cannot stop it.
    """

    def __init__(self, slack: int, max_wait: float) -> None:
        self.slack = slack
        self.max_wait = max_wait
        self.progress: dict[object, int] = {}
        self.changed = asyncio.Condition()

    def may_call(self, key: object) -> bool:
        return self.progress[key] <= min(self.progress.values()) + self.slack

    def enter(self, key: object) -> None:
        self.progress[key] = 0

    async def leave(self, key: object) -> None:
        del self.progress[key]
        async with self.changed:
            self.changed.notify_all()

    async def call(self, key: object) -> None:
        """Wait for this request's turn, then count its call."""
        async with self.changed:
            with contextlib.suppress(TimeoutError):  # waited long enough: go anyway
                await asyncio.wait_for(self.changed.wait_for(lambda: self.may_call(key)), self.max_wait)
            self.progress[key] += 1
            self.changed.notify_all()
