"""TensorRT optimization profiles of a network, derived from the shapes the decode loop sends.

A network's dynamic axes take the values :func:`tts_triton.core.shapes.axis_values` lists. Each bucketed axis
(tokens, vocoder frames) gets one profile per bucket, pinned to it (min = opt = max); a ranged axis
(reference-mel frames) spans its range in one profile; several axes multiply. Every profile spans the
batch sizes 1..``max_batch_size`` with the middle of :func:`tts_triton.core.shapes.batch_buckets` as its
optimum. The engine builder (:mod:`tts_triton.export.tensorrt`) builds exactly these profiles, and the
``tensorrt`` repository lists them in each instance group (without that list Triton uses profile 0 only).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from tts_triton.core.contract import ModelSpec
from tts_triton.core.shapes import AxisValues, axis_values, batch_buckets

__all__ = ["Profile", "ShapeRange", "network_profiles"]


@dataclass(frozen=True)
class ShapeRange:
    """The min, opt and max shape of one input in one profile (the batch axis first when batched)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def admits(self, shape: tuple[int, ...]) -> bool:
        """Whether ``shape`` lies within [min, max] on every axis."""
        return len(shape) == len(self.min) and all(
            low <= size <= high for low, size, high in zip(self.min, shape, self.max, strict=True))


@dataclass(frozen=True)
class Profile:
    """One optimization profile: a shape range per network input."""

    shapes: Mapping[str, ShapeRange]

    def admits(self, shapes: Mapping[str, tuple[int, ...]]) -> bool:
        """Whether one request with these input shapes runs in this profile."""
        return shapes.keys() == self.shapes.keys() and all(self.shapes[n].admits(s) for n, s in shapes.items())


def _axis_choices(values: AxisValues) -> list[tuple[int, int, int]]:
    """(min, opt, max) of each profile along one axis."""
    if values.buckets:
        return [(bucket, bucket, bucket) for bucket in values.buckets]
    return [(values.low, (values.low + values.high) // 2, values.high)]


def network_profiles(spec: ModelSpec, max_batch_size: int,
                     axes: Mapping[str, AxisValues] | None = None) -> list[Profile]:
    """The profiles of ``spec`` for batches up to ``max_batch_size`` (ignored when not batched).

    Raises ``ValueError`` for an input axis that is neither a fixed size nor a dynamic axis with known values.
    """
    axes = axis_values() if axes is None else axes
    dynamic = sorted({dim for t in spec.inputs for dim in t.dims if isinstance(dim, str)})
    for name in dynamic:
        if name not in axes or not axes[name].high:
            raise ValueError(f"{spec.name}: input axis {name!r} has no known values (tts_triton.core.shapes)")
    for t in spec.inputs:
        if any(isinstance(dim, int) and dim < 0 for dim in t.dims):
            raise ValueError(f"{spec.name}: input {t.name} has an unnamed dynamic axis")
    batches = batch_buckets(max_batch_size) if spec.batched else ()
    batch = ((1,), (batches[len(batches) // 2],), (max_batch_size,)) if spec.batched else ((), (), ())
    profiles = []
    for combination in itertools.product(*(_axis_choices(axes[name]) for name in dynamic)):
        chosen = dict(zip(dynamic, combination, strict=True))
        shapes = {}
        for t in spec.inputs:
            ends = [tuple(chosen[d][k] if isinstance(d, str) else d for d in t.dims) for k in range(3)]
            shapes[t.name] = ShapeRange(*(batch[k] + ends[k] for k in range(3)))
        profiles.append(Profile(shapes))
    return profiles
