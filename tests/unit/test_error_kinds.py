"""The one table of error kinds (tts_triton.errors.KINDS): every kind has its mapping in the server (exception,
Triton status, outcome label), the client library (error class), the health check and the gateway (HTTP status),
and travels as the message's mark, never as its prose. Pure logic: no server."""

from __future__ import annotations

import grpc
import pytest
from tritonclient.utils import InferenceServerException

from tts_triton.client.errors import KIND_ERRORS, TTSError, translate_error
from tts_triton.core.contract import TEXT
from tts_triton.errors import (
    FAILED,
    KINDS,
    Cancelled,
    ErrorKind,
    InvalidInput,
    Refused,
    Stopped,
    TimedOut,
    mark,
    read_mark,
)
from tts_triton.gateway.speech import api_error_for
from tts_triton.model_instance.lifecycle import OUTCOMES, error_status, kind_of, outcome_of
from tts_triton.processes.health import classify_error as health_of

#: One exception the server ends a request with, of each kind.
ENDINGS = (Stopped(), Cancelled(), TimedOut("synthesis stopped at its time limit of 1 s"),
           Refused("server busy: limit of 2"), InvalidInput(TEXT, "is empty"), RuntimeError("decoder died"))
#: ``triton_python_backend_utils.TritonError``'s codes.
TRITON_CODES = {"UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS",
                "CANCELLED"}


def test_every_kind_is_one_the_server_ends_a_request_with() -> None:
    assert {kind_of(err) for err in ENDINGS} == set(KINDS.values())
    assert ("completed", *(kind.outcome for kind in KINDS.values())) == OUTCOMES


@pytest.mark.parametrize("err", ENDINGS, ids=lambda err: type(err).__name__)
def test_the_server_answers_with_the_kinds_status_and_mark(err: BaseException) -> None:
    kind = kind_of(err)
    status, message = error_status(err, "synthesis failed")
    assert status == kind.triton and status in TRITON_CODES and kind.grpc in grpc.StatusCode.__members__
    assert read_mark(message).kind is kind and outcome_of(err) == kind.outcome
    assert str(err) in read_mark(message).text


@pytest.mark.parametrize("kind", KINDS.values(), ids=lambda kind: kind.name)
def test_each_kind_maps_in_the_client_health_check_and_gateway(kind: ErrorKind) -> None:
    message = mark(kind, "TEXT: is empty", TEXT) if kind.name == "invalid_input" else mark(kind, "went wrong")
    for status in (None, f"StatusCode.{kind.grpc}"):  # a stream error carries no status
        error = translate_error(InferenceServerException(message, status))
        assert type(error) is KIND_ERRORS[kind.name] and error.kind == kind.name
        assert kind.name not in error.message, "the client hands on the message without its mark"
    assert set(KIND_ERRORS) == set(KINDS)
    assert health_of(InferenceServerException(message)) == kind.health
    answer = api_error_for(error)
    assert (answer.status, answer.code) == (kind.http, kind.code)
    if kind.name == "invalid_input":
        assert answer.param == "input" and error.input_name == TEXT


def test_prose_classifies_nothing() -> None:
    """The words of a message never decide its kind: only the mark at its end does."""
    assert read_mark("server busy: limit of 2").kind is None
    assert read_mark("TEXT: [tts:busy] in the middle").kind is None
    assert read_mark(mark(KINDS["busy"], "x") + " trailing").kind is None
    assert read_mark("x [tts:unknown_kind]").kind is None


def test_each_kinds_grpc_status_is_its_triton_code_as_clients_see_it() -> None:
    """Triton answers a ``TritonError`` code with the gRPC status of the same name (``INVALID_ARG`` alone is
    spelled out), so the table's two columns must agree."""
    for kind in KINDS.values():
        assert kind.grpc == {"INVALID_ARG": "INVALID_ARGUMENT"}.get(kind.triton, kind.triton), kind.name


@pytest.mark.parametrize("err", ENDINGS, ids=lambda err: type(err).__name__)
def test_the_servers_words_without_the_mark_classify_as_nothing(err: BaseException) -> None:
    """The prose the server writes for each kind, stripped of its mark, is read as no kind by the client, the
    health check and the gateway: rewording a message can change no classification."""
    words = read_mark(error_status(err, "synthesis failed")[1]).text
    error = translate_error(InferenceServerException(words))
    assert error.kind is None and type(error) is TTSError
    assert health_of(InferenceServerException(words)) == "dead"
    assert (api_error_for(error).status, api_error_for(error).code) == (FAILED.http, FAILED.code)


@pytest.mark.parametrize("kind", KINDS.values(), ids=lambda kind: kind.name)
def test_the_mark_decides_whatever_the_words_say(kind: ErrorKind) -> None:
    """Another kind's words before the mark change nothing."""
    for words in ("server busy: limit of 2", "synthesis stopped at its time limit of 1 s", "TEXT: is empty"):
        error = translate_error(InferenceServerException(mark(kind, words)))
        assert error.kind == kind.name and type(error) is KIND_ERRORS[kind.name]
        assert health_of(InferenceServerException(mark(kind, words))) == kind.health
