"""Batching of independent requests: group those that can run as one call, merge them, split results back.

Triton's dynamic batcher hands a Python-backend model a list of requests; each carries its own batch
axis (axis 0). Requests whose tensors agree in dtype and non-batch shape can be concatenated into one
call; the outputs are split back by each request's row count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Feed = Mapping[str, np.ndarray]


def batch_groups(feeds: Sequence[Feed], *, batched: bool = True) -> list[list[int]]:
    """Indices of the requests that can run as one call (equal dtypes and non-batch shapes), in arrival order."""
    if not batched:
        return [[i] for i in range(len(feeds))]
    groups: dict[tuple, list[int]] = {}
    for i, feed in enumerate(feeds):
        key = tuple((name, array.dtype.str, array.shape[1:]) for name, array in sorted(feed.items()))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def rows(feed: Feed) -> int:
    """The batch size of one request (its tensors' common axis 0)."""
    return len(next(iter(feed.values())))


def merge(feeds: Sequence[Feed]) -> dict[str, np.ndarray]:
    """One feed holding every request's rows, in order (the requests must form one batch group)."""
    if len(feeds) == 1:
        return dict(feeds[0])
    return {name: np.concatenate([feed[name] for feed in feeds]) for name in feeds[0]}


def pad_rows(array: np.ndarray, batch: int) -> np.ndarray:
    """``array`` with zero rows appended up to ``batch`` rows."""
    missing = batch - len(array)
    if missing <= 0:
        return array
    return np.concatenate([array, np.zeros((missing, *array.shape[1:]), array.dtype)])


def split(outputs: Mapping[str, np.ndarray], sizes: Sequence[int]) -> list[dict[str, np.ndarray]]:
    """The outputs of a merged call cut back into one mapping per request of ``sizes`` rows."""
    total = sum(sizes)
    for name, array in outputs.items():
        if len(array) != total:
            raise RuntimeError(f"output {name!r} has batch size {len(array)}, the batch had {total} rows")
    if len(sizes) == 1:
        return [dict(outputs)]
    bounds = np.cumsum(sizes)[:-1]
    per_request: list[dict[str, np.ndarray]] = [{} for _ in sizes]
    for name, array in outputs.items():
        for result, part in zip(per_request, np.split(array, bounds), strict=True):
            result[name] = part
    return per_request
