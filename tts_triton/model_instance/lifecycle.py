"""How one request to the Python-backend models is admitted, stopped, timed and answered; free of Triton.

- :class:`Admission`: the bound on requests in flight in one model instance; past it a request is
  :class:`Refused` at once (UNAVAILABLE naming the limit) instead of slowing every stream down.
- :class:`StopBoard`: in-band stops. A client ends a ``tts`` stream early by sending a second request
  whose :data:`STOP_PARAMETER` names the first one's request id; whichever instance receives it posts
  the id on the board (shared by the model's instances on one host), the stream's own instance sees it
  at its next decoder call and ends the stream with a normal FINAL. No gRPC cancel is involved (Triton
  2.51's gRPC frontend can crash around cancelled decoupled streams).
- :class:`Deadline`: the server-side time limit, shortened by the request's own ``timeout``.
- :class:`CancelPoll`: whether the client cancelled, asked of Triton at most every :data:`CANCEL_POLL_S`.
- :func:`kind_of`, :func:`outcome_of` and :func:`error_status`: the error kind (:data:`tts_triton.errors.KINDS`)
  of how a request ended, its ``tts_requests_total`` outcome label, and the Triton status and marked message
  its error response carries.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tts_triton.core.config import LIMITS
from tts_triton.core.contract import STOP_PARAMETER
from tts_triton.errors import (
    BUSY,
    CANCELLED,
    FAILED,
    INVALID_INPUT,
    KINDS,
    STOPPED,
    TIMED_OUT,
    Cancelled,
    ErrorKind,
    InvalidInput,
    Refused,
    Stopped,
    TimedOut,
    mark,
)

__all__ = ["CANCEL_POLL_S", "OUTCOMES", "STOP_PARAMETER", "Admission", "CancelPoll", "Deadline", "StopBoard",
           "error_status", "kind_of", "outcome_of", "stop_target"]

#: How a request ended, the ``outcome`` label of ``tts_requests_total``: completed, or its error kind's.
OUTCOMES = ("completed", *(kind.outcome for kind in KINDS.values()))
#: Request ids a stop may name: what a client library generates (uuid hex) and similar tokens.
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class Deadline:
    """When a request must stop: ``limit_s`` after it started, or sooner when its ``timeout_us`` says so
    (Triton's request ``timeout`` in microseconds; 0 for none)."""

    def __init__(self, timeout_us: int, limit_s: float = LIMITS.max_request_seconds) -> None:
        self.seconds = min(limit_s, timeout_us / 1e6) if timeout_us else limit_s
        self.at = time.monotonic() + self.seconds

    def passed(self) -> bool:
        return time.monotonic() >= self.at


#: Seconds between two asks whether a request was cancelled. Each ask is a round trip to the server process that
#: holds up the BLS instance's one event loop, and so every stream on it: asked at every decoder call, it took 18 % of
#: the loop's time at 4 streams (docs/records/bench/host-python.md); a cancel now waits this long at most.
CANCEL_POLL_S = 0.1


class CancelPoll:
    """``ask()`` (Triton's ``is_cancelled``) called at most once per ``every`` seconds (default :data:`CANCEL_POLL_S`),
    the first time ``every`` after the poll was made; in between, its last answer. Once True, it stays True."""

    def __init__(self, ask: Callable[[], bool], every: float | None = None) -> None:
        self.ask = ask
        self.every = CANCEL_POLL_S if every is None else every
        self.cancelled = False
        self.next = time.monotonic() + self.every

    def __call__(self) -> bool:
        if not self.cancelled and (now := time.monotonic()) >= self.next:
            self.cancelled = bool(self.ask())
            self.next = now + self.every
        return self.cancelled


class Admission:
    """The bound on requests in flight in one model over all its instances on one server: at most
    ``max_streams`` (0: no bound). Each instance is a process of its own and publishes its count as the size of
    its own file in ``directory`` (the server's stop board, :func:`default_stop_directory`): one ``ftruncate``
    per change, never a torn value. A new request is admitted while the sum over the instances whose process
    lives is below the bound, so a stub that died counts for nothing, and instances that admit at the same
    moment may pass the bound by one each. (Triton does not spread requests evenly over the instances of an
    async model: a per-instance share refused a tenth of the requests at exactly the bound.)"""

    def __init__(self, max_streams: int, model: str = "tts", directory: Path | None = None) -> None:
        if max_streams < 0:
            raise ValueError(f"need max_streams >= 0, got {max_streams}")
        self.max_streams = max_streams
        self.model = model
        self.active = 0
        self.directory = directory or default_stop_directory()
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._prefix = f"active.{model}."
        self._path = self.directory / f"{self._prefix}{os.getpid()}"
        self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o600)
        os.ftruncate(self._fd, 0)

    def in_flight(self) -> int:
        """Requests in flight in this model over its live instances (this one's own count included)."""
        total = self.active
        for entry in os.scandir(self.directory):
            if entry.name.startswith(self._prefix) and (pid := int(entry.name[len(self._prefix):])) != os.getpid():
                try:
                    os.kill(pid, 0)
                    total += entry.stat().st_size
                except ProcessLookupError:  # the file of a stub that died
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                except OSError:  # gone meanwhile
                    continue
        return total

    def enter(self) -> None:
        """Count one more request in flight, or raise :class:`Refused` when the bound is reached."""
        if self.max_streams and (in_flight := self.in_flight()) >= self.max_streams:
            raise Refused(f"server busy: {self.model} already runs {in_flight} requests, its limit of "
                          f"{self.max_streams} (config parameter max_streams); retry later or elsewhere")
        self._publish(self.active + 1)

    def leave(self) -> None:
        self._publish(self.active - 1)

    def close(self) -> None:
        """Withdraw this instance's count (its model is unloading)."""
        with contextlib.suppress(OSError):
            os.unlink(self._path)
            os.close(self._fd)

    def _publish(self, active: int) -> None:
        self.active = active
        os.ftruncate(self._fd, active)


def default_stop_directory() -> Path:
    """The stop board of this server: one folder per tritonserver process (the stubs' parent), in /dev/shm
    where there is one (memory-backed; the Python backend needs it anyway)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    return base / f"tts_triton_stops_{os.getppid()}"


class StopBoard:
    """Request ids that a client stopped in-band, as empty files in ``directory`` (shared by the instances of
    the models on one server). A request clears its own id when it ends; ids posted for requests that had
    already ended are swept after ``max_age_s``, and boards of servers no longer running when one is opened."""

    def __init__(self, directory: Path | None = None, max_age_s: float = 600.0) -> None:
        self.directory = directory or default_stop_directory()
        self.max_age_s = max_age_s
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._sweep_dead_servers()

    def post(self, request_id: str) -> None:
        """Stop request ``request_id`` at its next decoder call; raises InvalidInput for an id no client sends."""
        if not _REQUEST_ID.fullmatch(request_id):
            raise InvalidInput(STOP_PARAMETER, f"{request_id[:40]!r} is not a request id (1-128 of A-Za-z0-9_.:-)")
        (self.directory / request_id).touch()
        self.sweep()

    def posted(self, request_id: str) -> bool:
        return bool(request_id) and os.path.exists(self.directory / request_id)

    def clear(self, request_id: str) -> None:
        if request_id:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / request_id)

    def sweep(self) -> None:
        """Remove stops older than ``max_age_s`` (their requests had ended before the stop came)."""
        old = time.time() - self.max_age_s
        for path in self.directory.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < old:
                    path.unlink()

    def _sweep_dead_servers(self) -> None:
        for board in self.directory.parent.glob("tts_triton_stops_*"):
            pid = board.name.rsplit("_", 1)[-1]
            if board != self.directory and pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    for path in board.iterdir():
                        path.unlink()
                    board.rmdir()


def stop_target(parameters_json: str) -> str | None:
    """The request id an in-band stop names (:data:`STOP_PARAMETER` of the request's parameters, as
    ``request.parameters()`` returns them), or None for an ordinary request."""
    try:
        params = json.loads(parameters_json or "{}")
    except json.JSONDecodeError:
        return None
    value = params.get(STOP_PARAMETER) if isinstance(params, dict) else None
    return None if value is None else str(value)


#: The exceptions that end a request, by the error kind they are (any other: :data:`~tts_triton.errors.FAILED`).
_KIND_OF = ((Stopped, STOPPED), (Cancelled, CANCELLED), (TimedOut, TIMED_OUT), (Refused, BUSY),
            (InvalidInput, INVALID_INPUT))


def kind_of(err: BaseException) -> ErrorKind:
    """The error kind of the exception that ended a request."""
    return next((kind for cls, kind in _KIND_OF if isinstance(err, cls)), FAILED)


def outcome_of(err: BaseException | None) -> str:
    """The :data:`OUTCOMES` label of a request that ended with ``err`` (None: it completed)."""
    return "completed" if err is None else kind_of(err).outcome


def error_status(err: BaseException, failed: str) -> tuple[str, str]:
    """The Triton status (a ``TritonError`` code name, the kind's) and message of the error response for ``err``,
    the message marked with its kind (:func:`~tts_triton.errors.mark`): bad input names the input, a cancelled
    or stopped request says so, a refused or timed-out one says why, a failure says what failed (``failed``,
    e.g. ``"synthesis failed"`` or the model name) and the exception."""
    kind = kind_of(err)
    if kind is INVALID_INPUT:
        return kind.triton, mark(kind, str(err), err.input_name)  # type: ignore[attr-defined]
    if kind in (CANCELLED, STOPPED):
        text = "request cancelled by the client"
    elif kind is FAILED:
        text = f"{failed}: {type(err).__name__}: {err}"
    else:
        text = str(err)
    return kind.triton, mark(kind, text)
