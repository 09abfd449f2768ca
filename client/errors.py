"""Typed errors of the client, and their classification from what the server sent.

Non-streaming calls carry a status (gRPC ``StatusCode.*`` or an HTTP code) and are classified by
it alone. Over a gRPC stream Triton delivers an error as a message only, so stream errors (no
status) are classified by their text: the server's contract is that a bad-input message names the
input tensor (:data:`tts_triton.core.contract.TTS_INPUTS`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import grpc
from tritonclient.utils import InferenceServerException

from tts_triton.core.contract import TTS_INPUTS

__all__ = [
    "InvalidInputError",
    "ServerBusyError",
    "ServerUnavailableError",
    "TTSError",
    "TTSTimeoutError",
    "classify_error",
    "ended_by_backend",
    "translate_error",
    "translated_errors",
]


class TTSError(Exception):
    """Any failure of a TTS request. ``message`` is the server's (or transport's) text, verbatim;
    ``status`` the status it came with (``"INVALID_ARGUMENT"``, ``"400"``...), None over a stream."""

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

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


_STATUS_KINDS: dict[str, type[TTSError]] = {
    **dict.fromkeys(("INVALID_ARGUMENT", "400"), InvalidInputError),
    **dict.fromkeys(("UNAVAILABLE", "NOT_FOUND", "404", "502", "503"), ServerUnavailableError),
    **dict.fromkeys(("DEADLINE_EXCEEDED", "408", "504"), TTSTimeoutError),
}

_BUSY_TEXT = re.compile(r"\bserver busy\b", re.IGNORECASE)
_TIMEOUT_TEXT = re.compile(r"deadline exceeded|timed out", re.IGNORECASE)
_UNAVAILABLE_TEXT = re.compile(
    r"unknown model|not ready|no available versions|failed to connect|connection refused", re.IGNORECASE
)
#: Triton's Python backend refusing a request whose inputs do not fit the model's shared-memory region (capped:
#: tts_triton.ops.memory): an error of the backend, not of the model, so the request ends with it (no FINAL follows).
_TOO_LARGE_TEXT = re.compile(r"Failed to increase the shared memory pool size")
# An input name counts in upper case only ("text" is too common a word).
_INVALID_TEXT = re.compile(rf"\b({'|'.join(t.name for t in TTS_INPUTS)})\b|(?i:invalid (argument|input))")


def classify_error(message: str, status: str | None = None) -> type[TTSError]:
    """The error class for a server error. With a status (non-stream calls) the status alone
    decides, an unlisted one giving :class:`TTSError`; without one (stream errors) the message
    does: a busy server, timeouts, then unavailability, then a named input or a request too large for the
    model's shared memory. An unavailable server whose message says it is busy (the admission bound) gives
    :class:`ServerBusyError` either way."""
    if status is not None:
        kind = _STATUS_KINDS.get(status.removeprefix("StatusCode."), TTSError)
        return ServerBusyError if kind is ServerUnavailableError and _BUSY_TEXT.search(message) else kind
    if _BUSY_TEXT.search(message):
        return ServerBusyError
    if _TIMEOUT_TEXT.search(message):
        return TTSTimeoutError
    if _UNAVAILABLE_TEXT.search(message):
        return ServerUnavailableError
    if _INVALID_TEXT.search(message) or _TOO_LARGE_TEXT.search(message):
        return InvalidInputError
    return TTSError


def ended_by_backend(message: str) -> bool:
    """Whether a stream error is one that ended its request in Triton's Python backend before the model saw it
    (a request too large for the model's shared memory): no FINAL follows it."""
    return bool(_TOO_LARGE_TEXT.search(message))


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
    return classify_error(message, status)(message, status)


@contextlib.contextmanager
def translated_errors() -> Iterator[None]:
    """Re-raise tritonclient, grpc and socket errors raised in the block as :class:`TTSError` subclasses."""
    try:
        yield
    except TTSError:  # already typed (ServerUnavailableError and TTSTimeoutError are OSErrors too)
        raise
    except (InferenceServerException, grpc.RpcError, OSError) as e:
        raise translate_error(e) from e
