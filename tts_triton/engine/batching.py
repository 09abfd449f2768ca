"""Batching of independent requests: group those that can run as one call, merge them, split results back.

Triton's dynamic batcher hands a Python-backend model a list of requests (of any shapes: the network
configs allow ragged batches); each carries its own batch axis (axis 0). Requests whose tensors agree
in dtype and non-batch shape are concatenated into one call and the outputs are split back by each
request's row count. With a :class:`Padding` (a network's ``masked_axes``), requests that differ only
along a masked axis join too: each is zero-padded to the group's longest, and its outputs are cut back
to its own length.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tts_triton.core.contract import ModelSpec, TensorSpec

Feed = Mapping[str, np.ndarray]
#: tensor name -> {array axis (batch axis 0 included): masked axis name}
AxisMap = dict[str, dict[int, str]]


@dataclass(frozen=True)
class Padding:
    """Where a network's masked axes lie in its input and output arrays."""

    inputs: AxisMap
    outputs: AxisMap

    @classmethod
    def of(cls, spec: ModelSpec) -> Padding:
        def axes(tensors: tuple[TensorSpec, ...]) -> AxisMap:
            found = {t.name: {i + 1: d for i, d in enumerate(t.dims) if d in spec.masked_axes} for t in tensors}
            return {name: where for name, where in found.items() if where}

        return cls(axes(spec.inputs), axes(spec.outputs))

    def __bool__(self) -> bool:
        """False for a network without masked axes (its requests merge only when their shapes agree)."""
        return bool(self.inputs)

    def lengths(self, feed: Feed) -> dict[str, int]:
        """Masked axis name -> its length in ``feed``."""
        return {name: feed[tensor].shape[axis] for tensor, where in self.inputs.items() for axis, name in where.items()}

    def key(self, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
        """``shape`` without its batch axis, masked axes as -1: requests with equal keys can be padded together."""
        where = self.inputs.get(name, {})
        return tuple(-1 if axis in where else size for axis, size in enumerate(shape) if axis)


def batch_groups(feeds: Sequence[Feed], *, batched: bool = True, padding: Padding | None = None) -> list[list[int]]:
    """Indices of the requests that can run as one call (equal dtypes and non-batch shapes, masked axes
    aside with ``padding``), in arrival order."""
    if not batched or len(feeds) < 2:
        return [[i] for i in range(len(feeds))]
    groups: dict[tuple, list[int]] = {}
    for i, feed in enumerate(feeds):
        key = tuple((name, array.dtype, padding.key(name, array.shape) if padding else array.shape[1:])
                    for name, array in sorted(feed.items()))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def rows(feed: Feed) -> int:
    """The batch size of one request (its tensors' common axis 0)."""
    return len(next(iter(feed.values())))


def merge(feeds: Sequence[Feed], padding: Padding | None = None) -> dict[str, np.ndarray]:
    """One feed holding every request's rows, in order (the requests must form one batch group); with
    ``padding``, each zero-padded along the masked axes to the longest of the group."""
    if len(feeds) == 1:
        return dict(feeds[0])
    if not padding:
        return {name: np.concatenate([feed[name] for feed in feeds]) for name in feeds[0]}
    lengths = [padding.lengths(feed) for feed in feeds]
    longest = {axis: max(sizes[axis] for sizes in lengths) for axis in lengths[0]}
    merged = {}
    for name, first in feeds[0].items():
        where = padding.inputs.get(name, {})
        if not where or all(sizes == longest for sizes in lengths):  # nothing to pad: one copy
            merged[name] = np.concatenate([feed[name] for feed in feeds])
            continue
        shape = [longest[where[a]] if a in where else size for a, size in enumerate(first.shape)]
        shape[0] = sum(len(feed[name]) for feed in feeds)
        merged[name] = out = np.zeros(shape, first.dtype)
        row = 0
        for feed in feeds:  # each request's block, at the top left of its rows
            array = feed[name]
            out[(slice(row, row + len(array)), *(slice(0, size) for size in array.shape[1:]))] = array
            row += len(array)
    return merged


def pad_rows(array: np.ndarray, batch: int) -> np.ndarray:
    """``array`` with zero rows appended up to ``batch`` rows."""
    missing = batch - len(array)
    if missing <= 0:
        return array
    return np.concatenate([array, np.zeros((missing, *array.shape[1:]), array.dtype)])


def split(outputs: Mapping[str, np.ndarray], feeds: Sequence[Feed],
          padding: Padding | None = None) -> list[dict[str, np.ndarray]]:
    """The outputs of a merged call of ``feeds`` cut back into one mapping per request: its rows and,
    with ``padding``, its own length along the masked axes."""
    sizes = [rows(feed) for feed in feeds]
    total = sum(sizes)
    for name, array in outputs.items():
        if len(array) != total:
            raise RuntimeError(f"output {name!r} has batch size {len(array)}, the batch had {total} rows")
    if len(sizes) == 1:
        return [dict(outputs)]
    bounds = itertools.pairwise(itertools.accumulate(sizes, initial=0))
    per_request = [{name: array[lo:hi] for name, array in outputs.items()} for lo, hi in bounds]  # views
    if padding:
        for feed, result in zip(feeds, per_request, strict=True):
            lengths = padding.lengths(feed)
            for name, where in padding.outputs.items():
                if name in result:
                    result[name] = result[name][tuple(slice(0, lengths[where[a]]) if a in where else slice(None)
                                                      for a in range(result[name].ndim))]
    return per_request
