"""The input shapes a network model accepts: those the BLS sends (:mod:`tts_triton.core.shapes`), read from its
config."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tts_triton.core.contract import TensorSpec
from tts_triton.core.layout import INPUT_AXES
from tts_triton.core.shapes import AxisValues, axis_values, shape_problems
from tts_triton.model_instance.params import config_tensors, parameters

__all__ = ["RequestShapes"]


class RequestShapes:
    """Checks a request's input shapes against those the BLS sends (:mod:`tts_triton.core.shapes`), before any
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
