"""Request reading and error responses shared by the Python-backend models (the BLS and the network models).

The decisions behind them are Triton-free (:mod:`tts_triton.backend.lifecycle`,
:mod:`tts_triton.backend.request_shapes`); here they meet ``triton_python_backend_utils``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tts_triton.backend.lifecycle import error_status
from tts_triton.backend.request_shapes import RequestShapes
from tts_triton.errors import InvalidInput

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: for documentation
    pb_utils = None

__all__ = ["BLS_CALL_THREADS", "CallThreads", "error_response", "read_inputs"]

#: Threads that carry one BLS process's network calls. The Python backend runs each ``async_exec`` on its event
#: loop's default executor, whose Python default (cpu_count + 4 threads, at most 32: 6 on a 2-core host, 20 on a
#: 16-core GPU host) caps the calls in flight below what a loaded instance's streams ask for. 256: above the
#: server's own per-instance pool of BLS calls (``--backend-config=python,thread-pool-size``, 32 by default), so
#: that the server's setting is the one cap. Threads start only as calls need them.
BLS_CALL_THREADS = 256


class CallThreads:
    """The thread pool of a BLS process's ``async_exec`` calls, made the default executor of each event loop that
    runs them (:meth:`install`)."""

    def __init__(self, threads: int = BLS_CALL_THREADS) -> None:
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="bls-call")
        self._loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Make the pool ``loop``'s (default: the running loop's) default executor, once per loop."""
        loop = loop or asyncio.get_running_loop()
        if loop not in self._loops:
            loop.set_default_executor(self.executor)
            self._loops.add(loop)

    def close(self) -> None:
        """Stop the threads once their calls are done; calls not yet started are dropped."""
        self.executor.shutdown(wait=False, cancel_futures=True)


def read_inputs(request: Any, names: Iterable[str], *, model: str, required: Sequence[str] = (),
                shapes: RequestShapes | None = None) -> dict[str, np.ndarray | None]:
    """The request's input arrays by name (None for an absent one). A missing ``required`` input or a shape
    ``shapes`` rejects raises :class:`~tts_triton.errors.InvalidInput` (``"<model>: ..."``) before any
    input is read."""
    tensors = {name: pb_utils.get_input_tensor_by_name(request, name) for name in names}
    if missing := [name for name in required if tensors[name] is None]:
        raise InvalidInput(model, "; ".join(f"input {name!r} is missing" for name in missing))
    if shapes is not None and (problems := shapes.problems(
            {name: tuple(t.shape()) for name, t in tensors.items() if t is not None})):
        raise InvalidInput(model, "; ".join(problems))
    return {name: None if t is None else t.as_numpy() for name, t in tensors.items()}


def error_response(err: BaseException, failed: str) -> Any:
    """The error response for ``err`` (status and message: :func:`~tts_triton.backend.lifecycle.error_status`);
    an INTERNAL one is logged too."""
    status, message = error_status(err, failed)
    if status == "INTERNAL":
        pb_utils.Logger.log_error(message)
    return pb_utils.InferenceResponse(output_tensors=[],
                                      error=pb_utils.TritonError(message, getattr(pb_utils.TritonError, status)))
