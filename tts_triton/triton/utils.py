"""Request reading and error responses shared by the Python-backend models (the BLS and the network models).

The decisions behind them are Triton-free (:mod:`tts_triton.backend.lifecycle`,
:mod:`tts_triton.backend.request_shapes`); here they meet ``triton_python_backend_utils``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tts_triton.backend.lifecycle import error_status
from tts_triton.backend.request_shapes import RequestShapes
from tts_triton.errors import InvalidInput

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: for documentation
    pb_utils = None

__all__ = ["error_response", "read_inputs"]


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
