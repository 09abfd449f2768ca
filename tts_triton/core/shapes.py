"""The shapes the decode loop sends to each network, defined once.

Every dynamic axis of :mod:`tts_triton.core.contract` takes values from a small set that the
:class:`~tts_triton.core.config.StreamingConfig` and :class:`~tts_triton.core.config.RequestLimits` fix: token
counts are padded to ``token_buckets``, vocoder calls hold one of ``vocoder_frames``, reference mels are
bounded by the reference-audio limits. Batches are padded to :func:`batch_buckets`. The GPU runtime
captures one CUDA graph per (batch bucket, axis value), the TensorRT builder writes one optimization
profile per axis value, and the network models reject any other shape with INVALID_ARG.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_triton.core import contract
from tts_triton.core.config import LIMITS, STREAMING, RequestLimits, StreamingConfig


@dataclass(frozen=True)
class AxisValues:
    """The values one dynamic axis takes: ``buckets`` (exact sizes), or any size in ``[low, high]``."""

    buckets: tuple[int, ...] = ()
    low: int = 0
    high: int = 0

    def __post_init__(self) -> None:
        if self.buckets:
            object.__setattr__(self, "low", min(self.buckets))
            object.__setattr__(self, "high", max(self.buckets))

    def allows(self, size: int) -> bool:
        return size in self.buckets if self.buckets else self.low <= size <= self.high

    def describe(self) -> str:
        return f"one of {list(self.buckets)}" if self.buckets else f"{self.low}-{self.high}"


def axis_values(streaming: StreamingConfig = STREAMING, limits: RequestLimits = LIMITS) -> dict[str, AxisValues]:
    """Dynamic axis name (``contract.TOKENS`` ...) -> the values the decode loop sends."""
    ref_low, ref_high = limits.reference_frames()
    return {
        contract.TOKENS: AxisValues(streaming.token_buckets),
        contract.FRAMES: AxisValues(streaming.vocoder_frames),
        contract.REF_FRAMES: AxisValues(low=ref_low, high=ref_high),
        # the vocoder's output: one hop of samples per frame
        contract.SAMPLES: AxisValues(),
    }


def batch_buckets(max_batch_size: int) -> tuple[int, ...]:
    """Batch sizes a padded runtime prepares for: powers of two below ``max_batch_size``, then it."""
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    sizes = [1]
    while sizes[-1] * 2 < max_batch_size:
        sizes.append(sizes[-1] * 2)
    if sizes[-1] != max_batch_size:
        sizes.append(max_batch_size)
    return tuple(sizes)


def shape_problems(spec: contract.TensorSpec, shape: tuple[int, ...], axes: dict[str, AxisValues],
                   *, batched: bool, max_batch_size: int = 0) -> list[str]:
    """Why ``shape`` (the batch axis first when ``batched``) is not one the decode loop sends; empty if it is."""
    dims = spec.dims
    if batched:
        if not shape:
            return [f"{spec.name}: a batch axis is required"]
        if max_batch_size and not 1 <= shape[0] <= max_batch_size:
            return [f"{spec.name}: batch {shape[0]} is outside 1-{max_batch_size}"]
        shape = shape[1:]
    if len(shape) != len(dims):
        return [f"{spec.name}: shape {list(shape)} has {len(shape)} dimensions, expected {len(dims)}"]
    problems = []
    for size, dim in zip(shape, dims, strict=True):
        if isinstance(dim, int):
            if dim >= 0 and size != dim:
                problems.append(f"{spec.name}: dimension {size} must be {dim}")
        elif dim in axes and (values := axes[dim]).high and not values.allows(size):
            problems.append(f"{spec.name}: {dim} = {size} is not {values.describe()}")
    return problems
