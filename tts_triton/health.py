"""Deep health check: proves that every model can run an inference, not just that Triton answers.

Triton's own ``/v2/health/ready`` and ``/v2/models/<m>/ready`` stay 200 when a Python backend stub has
died (every request to that model then fails). :func:`check_health` instead runs, side by side, one
tiny real inference through each network model (the smallest shape the BLS sends, read from the
model's config and :mod:`tts_triton.shapes`), through ``tts_offline`` and through a ``tts`` stream
(which must end with its FINAL response), each bounded by ``timeout``.

Used by ``tts-triton serve`` (:mod:`tts_triton.supervisor` restarts the server when it fails) and by
the Helm chart's probes::

    python -m tts_triton.health --url localhost:8001 --timeout 10    # exit 0 healthy, 1 unhealthy
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient

from tts_triton import contract
from tts_triton.config import ModelConfig
from tts_triton.endpoints import DEFAULT_GRPC_URL
from tts_triton.serving.request_shapes import RequestShapes
from tts_triton.shapes import axis_values

__all__ = ["HEALTH_TEXT", "HealthReport", "ModelHealth", "check_health", "main", "smallest_inputs"]

#: What the BLS checks speak: one short sentence.
HEALTH_TEXT = "Hi."
#: The models checked, networks first.
CHECKED_MODELS = (*contract.network_specs(ModelConfig()), contract.TTS_OFFLINE, contract.TTS)


@dataclass(frozen=True)
class ModelHealth:
    """Whether one model answered a real inference within the timeout, how long it took, and why not."""

    model: str
    ok: bool
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class HealthReport:
    """The result of one :func:`check_health`; ``ok`` only when every model passed."""

    models: tuple[ModelHealth, ...]

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.models)

    @property
    def failed(self) -> list[str]:
        return [m.model for m in self.models if not m.ok]

    def summary(self) -> str:
        """One line per model: ``ok``/``FAILED``, seconds, and the error."""
        return "\n".join(f"{m.model}: {'ok' if m.ok else 'FAILED'} in {m.seconds:.2f} s"
                         + (f": {m.error}" if m.error else "") for m in self.models)


def smallest_inputs(model_config: dict[str, Any]) -> dict[str, np.ndarray]:
    """Zero-filled inputs of the smallest shape the BLS sends to a network (batch 1 when batched).

    ``model_config`` is the model's config as JSON (tritonclient ``get_model_config(as_json=True)``).
    """
    checker = RequestShapes(model_config)
    axes = axis_values()
    inputs = {}
    for name, spec in checker.specs.items():
        dims = [axes[d].low if isinstance(d, str) else d for d in spec.dims]
        shape = ([1] if checker.max_batch_size > 0 else []) + dims
        inputs[name] = np.zeros(shape, dtype=spec.dtype)
    return inputs


def _infer_inputs(arrays: dict[str, np.ndarray]) -> list[grpcclient.InferInput]:
    inputs = []
    for name, array in arrays.items():
        wire = "BYTES" if array.dtype == np.object_ else contract.WIRE_DTYPES[str(array.dtype)]
        tensor = grpcclient.InferInput(name, list(array.shape), wire)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def _text() -> list[grpcclient.InferInput]:
    return _infer_inputs({"TEXT": np.array([HEALTH_TEXT.encode()], dtype=np.object_)})


def _check_network(client: grpcclient.InferenceServerClient, model: str, timeout: float) -> None:
    config = client.get_model_config(model, as_json=True, client_timeout=timeout)["config"]
    client.infer(model, _infer_inputs(smallest_inputs(config)), client_timeout=timeout)


def _check_offline(client: grpcclient.InferenceServerClient, model: str, timeout: float) -> None:
    result = client.infer(model, _text(), client_timeout=timeout)
    if result.as_numpy("AUDIO").size == 0:
        raise RuntimeError("no audio")


def _check_stream(client: grpcclient.InferenceServerClient, model: str, timeout: float) -> None:
    done = threading.Event()
    errors: list[Exception] = []

    def on_response(result: Any, error: Exception | None) -> None:
        if error is not None:
            errors.append(error)
            done.set()
        elif result.get_response().parameters["triton_final_response"].bool_param:
            done.set()

    client.start_stream(on_response, stream_timeout=timeout)
    try:
        client.async_stream_infer(model, _text(), enable_empty_final_response=True)
        if not done.wait(timeout):
            raise TimeoutError(f"no final response within {timeout:g} s")
        if errors:
            raise errors[0]
    finally:
        client.stop_stream(cancel_requests=True)


def _check(url: str, model: str, timeout: float) -> ModelHealth:
    start = time.monotonic()
    if model == contract.TTS:
        run = _check_stream
    elif model == contract.TTS_OFFLINE:
        run = _check_offline
    else:
        run = _check_network
    try:
        with grpcclient.InferenceServerClient(url) as client:
            run(client, model, timeout)
    except Exception as err:  # any failure is the answer
        message = err.message() if hasattr(err, "message") and callable(err.message) else str(err)
        return ModelHealth(model, False, time.monotonic() - start, f"{type(err).__name__}: {message}")
    return ModelHealth(model, True, time.monotonic() - start)


def check_health(url: str, *, timeout: float = 10.0, models: Sequence[str] = CHECKED_MODELS) -> HealthReport:
    """Run one real inference through each of ``models`` (side by side) on the gRPC endpoint ``url``.

    Each must answer within ``timeout`` seconds; the whole check returns within about ``timeout``.
    Never raises for a failing server: the report says what failed.
    """
    with ThreadPoolExecutor(len(models)) as pool:
        results = list(pool.map(lambda m: _check(url, m, timeout), models))
    return HealthReport(tuple(results))


def main(argv: list[str] | None = None) -> int:
    """``python -m tts_triton.health``: exit status 0 when every model runs, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m tts_triton.health", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_GRPC_URL, help="gRPC endpoint, host:port")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds each model may take")
    parser.add_argument("--quiet", action="store_true", help="print only failures")
    args = parser.parse_args(argv)
    report = check_health(args.url, timeout=args.timeout)
    if not args.quiet or not report.ok:
        print(report.summary(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
