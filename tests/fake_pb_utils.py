"""A small stand-in for ``triton_python_backend_utils``: the names the project's Python models use, in plain
Python, so that the adapters run without a server. It models what the tests rely on: a response sender that
refuses anything after FINAL, metrics shared by name and labels (as Triton keeps them), and BLS child calls
answered by in-process handlers (:data:`CHILDREN`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1

#: model name -> async handler(inputs by name) -> outputs by name; a raised exception becomes an error response.
CHILDREN: dict[str, Callable[[dict[str, np.ndarray]], Awaitable[dict[str, np.ndarray]]]] = {}
#: (metric name, sorted labels) -> Metric: Triton returns the existing metric for the same name and labels.
METRICS: dict[tuple[str, tuple[tuple[str, str], ...]], Metric] = {}
#: Every (level, message) logged.
LOGGED: list[tuple[str, str]] = []


class TritonError:
    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED = range(8)

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class Tensor:
    def __init__(self, name: str, array: np.ndarray) -> None:
        self._name, self._array = name, np.asarray(array)

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None) -> None:
        self.tensors = {t.name(): t for t in output_tensors or []}
        self._error = error

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def output_tensors(self) -> list[Tensor]:
        return list(self.tensors.values())


def get_input_tensor_by_name(request: Any, name: str) -> Tensor | None:
    return request.tensors.get(name)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return response.tensors.get(name)


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled"))


class InferenceRequest:
    """A BLS call: answered by ``CHILDREN[model_name]``."""

    def __init__(self, model_name: str, inputs: list[Tensor], requested_output_names: list[str]) -> None:
        self.model_name, self.inputs, self.requested = model_name, inputs, requested_output_names

    async def async_exec(self) -> InferenceResponse:
        try:
            outputs = await CHILDREN[self.model_name]({t.name(): t.as_numpy() for t in self.inputs})
        except Exception as err:
            return InferenceResponse(error=TritonError(f"{type(err).__name__}: {err}"))
        return InferenceResponse([Tensor(n, outputs[n]) for n in self.requested])


class Logger:
    @staticmethod
    def log_info(message: str) -> None:
        LOGGED.append(("info", message))

    @staticmethod
    def log_warn(message: str) -> None:
        LOGGED.append(("warn", message))

    @staticmethod
    def log_error(message: str) -> None:
        LOGGED.append(("error", message))


class Metric:
    def __init__(self) -> None:
        self._value = 0.0

    def increment(self, value: float) -> None:
        self._value += value

    def set(self, value: float) -> None:
        self._value = value

    def value(self) -> float:
        return self._value


class MetricFamily:
    COUNTER, GAUGE = 0, 1

    def __init__(self, name: str, description: str, kind: int) -> None:
        self.name = name

    def Metric(self, labels: dict[str, str]) -> Metric:  # noqa: N802 (pb_utils' name)
        return METRICS.setdefault((self.name, tuple(sorted(labels.items()))), Metric())


def metric(name: str, **labels: str) -> float:
    """The value of metric ``name`` with exactly ``labels`` (0 when never created)."""
    found = METRICS.get((name, tuple(sorted(labels.items()))))
    return 0.0 if found is None else found.value()


class ResponseSender:
    """Records what a model sends; sending after FINAL raises, as Triton's sender does."""

    def __init__(self) -> None:
        self.sent: list[tuple[InferenceResponse | None, int]] = []

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if self.finals:
            raise RuntimeError("the response sender is closed: FINAL was sent")
        self.sent.append((response, flags))

    @property
    def finals(self) -> int:
        return sum(1 for _, flags in self.sent if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    @property
    def responses(self) -> list[InferenceResponse]:
        return [r for r, _ in self.sent if r is not None]

    @property
    def errors(self) -> list[TritonError]:
        return [r.error() for r in self.responses if r.has_error()]


class Request:
    """An incoming request as a model sees it."""

    def __init__(self, inputs: dict[str, np.ndarray], *, requested: list[str] | None = None, request_id: str = "",
                 parameters: dict[str, Any] | None = None, timeout_us: int = 0) -> None:
        self.tensors = {name: Tensor(name, value) for name, value in inputs.items()}
        self.requested = requested or []
        self.id = request_id
        self.params = parameters or {}
        self.timeout_us = timeout_us
        self.cancelled = False
        self.sender = ResponseSender()

    def requested_output_names(self) -> list[str]:
        return self.requested

    def request_id(self) -> str:
        return self.id

    def parameters(self) -> str:
        return json.dumps(self.params)

    def timeout(self) -> int:
        return self.timeout_us

    def is_cancelled(self) -> bool:
        return self.cancelled

    def get_response_sender(self) -> ResponseSender:
        return self.sender
