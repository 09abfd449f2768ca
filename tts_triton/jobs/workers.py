"""Worker processes for CPU-bound fan-out (corpus rendering, evaluation features)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["single_threaded_blas"]

_BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Set the BLAS thread counts of this process's environment to 1 while the block runs, then restore them.

    Worker processes started inside the block inherit the setting: ``jobs`` processes with a BLAS pool each
    oversubscribe the CPU (docs/corpus.md, "Measured build speed").
    """
    saved = {name: os.environ.get(name) for name in _BLAS_THREADS}
    os.environ.update(dict.fromkeys(_BLAS_THREADS, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
