"""How a request fails, as data: the error kinds every part agrees on, and the bad-input error.

:data:`KINDS` is the one table of error kinds: for each, the Triton status the server answers with, the
``outcome`` label of ``tts_requests_total``, the HTTP status the gateway answers with, and the health check's
reading of it. The server puts the kind in every error message it sends as a marker at its end
(:func:`mark`: ``"TEXT: is empty [tts:invalid_input:TEXT]"``); clients, the health check and the gateway read it
back with :func:`read_mark` instead of reading the prose, so rewording a message changes no classification.

The exceptions that end a request are all here, one per kind (any other exception is :data:`FAILED`):
:class:`Stopped`, :class:`Cancelled`, :class:`TimedOut`, :class:`Refused` and :class:`InvalidInput`. The front
end (TEXT), the voice bank (VOICE, EMOTION) and the request parser (REFERENCE_AUDIO, REFERENCE_SAMPLE_RATE) raise
:class:`InvalidInput` naming the input; the server answers it as :data:`INVALID_INPUT`, its message as raised
plus the mark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["BUSY", "CANCELLED", "FAILED", "INVALID_INPUT", "KINDS", "STOPPED", "TIMED_OUT", "Cancelled", "ErrorKind",
           "InvalidInput", "Mark", "Refused", "Stopped", "TimedOut", "mark", "read_mark"]


@dataclass(frozen=True)
class ErrorKind:
    """One way a request fails. ``name``: the marker and key; ``triton``: the ``TritonError`` code the server
    answers with (clients see its gRPC name, ``grpc``); ``outcome``: the ``tts_requests_total`` label;
    ``http`` and ``code``: the gateway's status and OpenAI error code; ``health``: what the deep health check
    makes of a model answering with it (``slow``: loaded, not to be restarted; ``dead``)."""

    name: str
    triton: str
    grpc: str
    outcome: str
    http: int
    code: str | None
    health: Literal["slow", "dead"]


#: Ended early by the client's in-band stop (the stream then ends with a normal FINAL).
STOPPED = ErrorKind("stopped", "CANCELLED", "CANCELLED", "stopped", 499, "stopped", "dead")
#: Cancelled by the client (gRPC cancel).
CANCELLED = ErrorKind("cancelled", "CANCELLED", "CANCELLED", "cancelled", 499, "cancelled", "dead")
#: Stopped at the server's time limit, or the request's own ``timeout``.
TIMED_OUT = ErrorKind("timed_out", "UNAVAILABLE", "UNAVAILABLE", "timed_out", 504, "timeout", "slow")
#: Refused at once: the model already runs its bound of streams; not started, worth retrying later or elsewhere.
BUSY = ErrorKind("busy", "UNAVAILABLE", "UNAVAILABLE", "refused", 503, "model_busy", "slow")
#: A request input is missing or malformed (:class:`InvalidInput`); the mark names the input.
INVALID_INPUT = ErrorKind("invalid_input", "INVALID_ARG", "INVALID_ARGUMENT", "invalid_input", 400, None, "dead")
#: Anything else: the synthesis failed.
FAILED = ErrorKind("failed", "INTERNAL", "INTERNAL", "failed", 500, "synthesis_failed", "dead")
#: Every kind by name, in the order of the outcome labels.
KINDS: dict[str, ErrorKind] = {k.name: k for k in (STOPPED, CANCELLED, TIMED_OUT, BUSY, INVALID_INPUT, FAILED)}

_OPEN, _CLOSE, _SEP = " [tts:", "]", ":"


@dataclass(frozen=True)
class Mark:
    """What :func:`read_mark` found: the kind (None for an unmarked message, e.g. one of Triton's own), the
    input it names (invalid input only) and the message without its mark."""

    kind: ErrorKind | None
    input_name: str | None
    text: str


def mark(kind: ErrorKind, message: str, input_name: str | None = None) -> str:
    """``message`` with ``kind`` (and the input at fault) marked at its end."""
    fields = kind.name if input_name is None else f"{kind.name}{_SEP}{input_name}"
    return f"{message}{_OPEN}{fields}{_CLOSE}"


def read_mark(message: str) -> Mark:
    """The kind, input and text of a message :func:`mark` made; an unmarked message gives ``kind`` None."""
    text, found, fields = message.rpartition(_OPEN)
    if not found or not fields.endswith(_CLOSE):
        return Mark(None, None, message)
    name, _, input_name = fields[:-len(_CLOSE)].partition(_SEP)
    kind = KINDS.get(name)
    if kind is None:
        return Mark(None, None, message)
    return Mark(kind, input_name or None, text)


class InvalidInput(ValueError):
    """A request input is missing or malformed: ``input_name`` names it, ``reason`` says why,
    and ``str(err)`` is ``"<input_name>: <reason>"``."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.input_name = name
        self.reason = reason


class Stopped(Exception):
    """The client stopped the request in-band (the server's stop board); the stream ends with a normal FINAL."""


class Cancelled(Exception):
    """The client cancelled the request; decoding stopped early."""


class TimedOut(Exception):
    """The request ran past its time limit; synthesis stopped (UNAVAILABLE)."""


class Refused(Exception):
    """The request was not started: the model already runs its bound of streams (UNAVAILABLE)."""
