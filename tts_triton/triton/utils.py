"""Request reading and error responses shared by the Python-backend models (the BLS and the network models).

The decisions behind them are Triton-free (:mod:`tts_triton.model_instance.lifecycle`,
:mod:`tts_triton.model_instance.request_shapes`); here they meet ``triton_python_backend_utils``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tts_triton.errors import InvalidInput
from tts_triton.model_instance.lifecycle import error_status
from tts_triton.model_instance.request_shapes import RequestShapes

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: for documentation
    pb_utils = None

__all__ = ["CallThreads", "error_response", "read_inputs"]


class CallThreads:
    """The thread pool of a BLS process's ``async_exec`` calls, made the default executor of each event loop that
    runs them (:meth:`install`); threads start only as calls need them.

    The Python stub runs each ``async_exec`` on its loop's default executor, Python's by default (cpu_count + 4
    threads, at most 32). The server carries each instance's calls on a pool of its own
    (``--backend-config=python,thread-pool-size``, 32 by default) that also carries the instance's response sends
    and cancellation checks: keep ``threads`` below it, or those queue behind the calls (with 32 of 32, streams of
    ``tests/served/test_cancel_stress.py`` ran to their end before their in-band stop was seen; 12 of 32 kept them)."""

    def __init__(self, threads: int) -> None:
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
    """The error response for ``err`` (status and message: :func:`~tts_triton.model_instance.lifecycle.error_status`);
    an INTERNAL one is logged too."""
    status, message = error_status(err, failed)
    if status == "INTERNAL":
        pb_utils.Logger.log_error(message)
    return pb_utils.InferenceResponse(output_tensors=[],
                                      error=pb_utils.TritonError(message, getattr(pb_utils.TritonError, status)))
