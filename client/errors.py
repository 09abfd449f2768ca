"""Typed errors of the client, and their classification from what the server sent.

The server marks every error it sends with its kind (:data:`tts_triton.errors.KINDS`, read by
:func:`~tts_triton.errors.read_mark`): the mark decides, on a stream (where Triton delivers an error as a
message only) and off it, and the error's ``message`` is the server's without the mark. An unmarked error
(Triton's or the transport's own) is classified by its status (gRPC ``StatusCode.*`` or an HTTP code). A
stream error with neither was refused before the model ran it (:func:`refused`); the gRPC clients then ask
whether the model is ready (:func:`refusal_error`). No error is classified by its text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import grpc
from tritonclient.utils import InferenceServerException

from tts_triton.errors import read_mark

__all__ = [
    "InvalidInputError",
    "ServerBusyError",
    "ServerUnavailableError",
    "TTSError",
    "TTSTimeoutError",
    "KIND_ERRORS",
    "classify_error",
    "final_follows",
    "refusal_error",
    "refused",
    "translate_error",
    "translated_errors",
]


class TTSError(Exception):
    """Any failure of a TTS request. ``message`` is the server's (or transport's) text, without the server's
    mark; ``status`` the status it came with (``"INVALID_ARGUMENT"``, ``"400"``...), None over a stream;
    ``kind`` the server's error kind (a name of :data:`~tts_triton.errors.KINDS`, None when unmarked) and
    ``input_name`` the input it names (bad input only)."""

    def __init__(self, message: str, status: str | None = None, *, kind: str | None = None,
                 input_name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind
        self.input_name = input_name

    def __str__(self) -> str:
        return self.message if self.status is None else f"[{self.status}] {self.message}"


class InvalidInputError(TTSError, ValueError):
    """The request was rejected for its content; the message names the offending input."""


class ServerUnavailableError(TTSError, ConnectionError):
    """The server cannot be reached, or the model is unknown or not ready."""


class ServerBusyError(ServerUnavailableError):
    """The server refused the request at once: it already runs as many streams as its limit allows. The
    request was not started; sending it again later (or to another server) may succeed."""


class TTSTimeoutError(TTSError, TimeoutError):
    """The request did not complete within its ``timeout``."""


#: The error class of each error kind the server marks.
KIND_ERRORS: dict[str, type[TTSError]] = {
    "stopped": TTSError, "cancelled": TTSError, "timed_out": TTSTimeoutError, "busy": ServerBusyError,
    "invalid_input": InvalidInputError, "failed": TTSError,
}
_STATUS_KINDS: dict[str, type[TTSError]] = {
    **dict.fromkeys(("INVALID_ARGUMENT", "400"), InvalidInputError),
    **dict.fromkeys(("UNAVAILABLE", "NOT_FOUND", "404", "502", "503"), ServerUnavailableError),
    **dict.fromkeys(("DEADLINE_EXCEEDED", "408", "504"), TTSTimeoutError),
}


def classify_error(message: str, status: str | None = None) -> type[TTSError]:
    """The error class for a server error: the server's mark decides (:data:`KIND_ERRORS`); an unmarked error
    by its status, an unlisted one giving :class:`TTSError`; one with neither is a :class:`TTSError`
    (:func:`refusal_error` tells more where the server can be asked)."""
    if (kind := read_mark(message).kind) is not None:
        return KIND_ERRORS[kind.name]
    if status is not None:
        return _STATUS_KINDS.get(status.removeprefix("StatusCode."), TTSError)
    return TTSError


def final_follows(message: str) -> bool:
    """Whether a FINAL follows a stream error: only after the model's own errors, which carry its mark. An
    unmarked one ended its request before the model ran it: Triton refused it (unknown model, an input of the
    wrong type) or its Python backend did, flagging the error itself as final (too large, a dead stub)."""
    return read_mark(message).kind is not None


def refused(error: InferenceServerException) -> bool:
    """Whether a stream error refused its request before the model ran it: it has no status (the transport's
    errors have one) and no mark (the model's own errors have one), so no FINAL follows it."""
    return error.status() is None and not final_follows(error.message() or str(error))


def refusal_error(error: InferenceServerException, model_ready: bool) -> TTSError:
    """The error for a refused request (:func:`refused`), given whether the server said its model is ready just
    after. Not ready (unknown, unloading, or no answer): :class:`ServerUnavailableError`, retried or sent to
    another endpoint. Ready: a plain :class:`TTSError`, not bad input: the client library's requests carry the
    contract's dtypes (a wrong type is a bug), and inputs too large for the Python backend's shared-memory region
    are far beyond the server's own limits (:data:`~tts_triton.core.config.LIMITS`: ``max_text_chars``,
    ``max_reference_seconds``, which the model refuses first as marked bad input naming the input), or the region
    is full of other open streams' inputs (:mod:`tts_triton.processes.memory`)."""
    return (TTSError if model_ready else ServerUnavailableError)(error.message() or str(error))


def translate_error(error: InferenceServerException | grpc.RpcError | OSError) -> TTSError:
    """The :class:`TTSError` for an exception raised by tritonclient, grpc or the HTTP transport
    (``TimeoutError`` -> :class:`TTSTimeoutError`, any other ``OSError`` -> :class:`ServerUnavailableError`)."""
    if isinstance(error, InferenceServerException):
        message, status = error.message() or str(error), error.status()
    elif isinstance(error, grpc.RpcError):
        message, status = error.details() or str(error), str(error.code())
    elif isinstance(error, TimeoutError):
        return TTSTimeoutError(str(error) or "timed out")
    else:
        return ServerUnavailableError(str(error))
    status = None if status is None else status.removeprefix("StatusCode.")
    found = read_mark(message)
    return classify_error(message, status)(found.text, status, kind=found.kind and found.kind.name,
                                           input_name=found.input_name)


@contextlib.contextmanager
def translated_errors() -> Iterator[None]:
    """Re-raise tritonclient, grpc and socket errors raised in the block as :class:`TTSError` subclasses."""
    try:
        yield
    except TTSError:  # already typed (ServerUnavailableError and TTSTimeoutError are OSErrors too)
        raise
    except (InferenceServerException, grpc.RpcError, OSError) as e:
        raise translate_error(e) from e
