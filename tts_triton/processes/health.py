"""Deep health check: tells a dead model from a slow one, not just that Triton answers.

Triton's own ``/v2/health/ready`` and ``/v2/models/<m>/ready`` stay 200 when a Python backend stub has
died (every request to that model then fails). :func:`check_health` instead runs, side by side, one
tiny real inference through each network model (the smallest shape the BLS sends, read from the
model's config and :mod:`tts_triton.core.shapes`), through ``tts_offline`` and through a ``tts`` stream
(which must end with its FINAL response), each bounded by ``timeout``, and, when the server process is
visible (same host or container), looks for each Python model's stub processes. Each model is then:

- ``ok``: it answered within ``timeout``;
- ``slow``: no answer within ``timeout``, refused as overloaded (RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED), or
  an error whose kind reads so (:data:`tts_triton.errors.KINDS`: busy, timed out): a loaded server, which
  readiness may shed but nothing must restart;
- ``dead``: it answered with any other error (``Stub process 'vocoder_0_0' is not healthy``, unknown
  model, server gone), or a stub instance of it no longer exists (a dead BLS stub never answers at all).

Liveness and self-healing act on ``dead`` only; readiness wants every model ``ok`` and no drain marker.

:func:`warm_up` runs the same requests, several side by side, until every model answered ok: a fresh server's
first calls (the BLS's first network calls, its cache connection, each network's first run) are paid by it, not
by the first users. ``tts-triton serve`` (:class:`~tts_triton.processes.triton_server.TritonServer` with ``warm_up``)
reports ready only after it, and the Helm chart's startup probe is ``--probe startup`` (a warm-up).
Used by ``tts-triton serve`` (:mod:`tts_triton.processes.supervisor` reloads a dead model) and by the Helm chart's
probes::

    python -m tts_triton.processes.health --url localhost:8001 --probe liveness   # exit 1 only when a model is dead
    python -m tts_triton.processes.health --url localhost:8001 --probe readiness  # exit 1 unless all ok, not draining
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import tritonclient.grpc as grpcclient

from tts_triton.core import contract
from tts_triton.core.config import ModelConfig
from tts_triton.core.endpoints import DEFAULT_GRPC_URL
from tts_triton.core.shapes import axis_values
from tts_triton.errors import read_mark
from tts_triton.model_instance.request_shapes import RequestShapes
from tts_triton.processes.ports import port_holders
from tts_triton.processes.triton_install import STUB

__all__ = ["DEAD", "DRAIN_MARK_ENV", "HEALTH_TEXT", "OK", "SLOW", "HealthReport", "ModelHealth", "check_health",
           "classify_error", "draining", "main", "missing_stubs", "smallest_inputs", "warm_up"]

#: What the BLS checks speak: one short sentence.
HEALTH_TEXT = "Hi."
#: The models checked, networks first.
CHECKED_MODELS = (*contract.network_specs(ModelConfig()), contract.TTS_OFFLINE, contract.TTS)
OK, SLOW, DEAD = "ok", "slow", "dead"
#: Environment variable naming the drain marker file (default ``DEFAULT_DRAIN_MARK``): while it exists the
#: readiness probe fails and the liveness probe passes (the models are being unloaded on purpose).
DRAIN_MARK_ENV = "TTS_TRITON_DRAIN_MARK"
DEFAULT_DRAIN_MARK = "/tmp/tts-triton-draining"
#: gRPC statuses of an overloaded server: a refusal for load, gRPC's own deadline.
_OVERLOADED = frozenset({"RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"})


@dataclass(frozen=True)
class ModelHealth:
    """One model's state (``OK``, ``SLOW`` or ``DEAD``), how long its check took, and why not ok."""

    model: str
    state: Literal["ok", "slow", "dead"]
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.state == OK


@dataclass(frozen=True)
class HealthReport:
    """The result of one :func:`check_health`; ``ok`` only when every model passed."""

    models: tuple[ModelHealth, ...]

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.models)

    @property
    def alive(self) -> bool:
        """No model is dead (slow ones may be): what liveness and self-healing look at."""
        return not self.dead

    @property
    def failed(self) -> list[str]:
        return [m.model for m in self.models if not m.ok]

    @property
    def dead(self) -> list[str]:
        return [m.model for m in self.models if m.state == DEAD]

    @property
    def slow(self) -> list[str]:
        return [m.model for m in self.models if m.state == SLOW]

    def summary(self) -> str:
        """One line per model: ``ok``/``SLOW``/``DEAD``, seconds, and the error."""
        return "\n".join(f"{m.model}: {m.state if m.ok else m.state.upper()} in {m.seconds:.2f} s"
                         + (f": {m.error}" if m.error else "") for m in self.models)


def classify_error(err: BaseException) -> str:
    """``SLOW`` for a timeout, an overload status or an error whose kind is read as slow (the server's mark),
    ``DEAD`` for any other error."""
    if isinstance(err, TimeoutError):
        return SLOW
    status = err.status() if hasattr(err, "status") and callable(err.status) else None
    if status is not None and status.removeprefix("StatusCode.") in _OVERLOADED:
        return SLOW
    message = err.message() if hasattr(err, "message") and callable(err.message) else str(err)
    kind = read_mark(message or "").kind
    return SLOW if kind is not None and kind.health == SLOW else DEAD


def missing_stubs(server_pid: int, configs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """``model -> instance names`` of Python-backend models whose stub process is gone.

    ``configs`` maps model names to their configs (tritonclient JSON). A stub is a child process of
    the server whose command line names its instance, ``<model>_<group>_<index>``; each group's first
    ``count`` instances must be there.
    """
    live = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent != server_pid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                words = cmdline.read().decode(errors="replace").split("\0")
        except (OSError, IndexError, ValueError):
            continue
        if words and words[0].endswith(STUB):  # a zombie's command line is empty: dead
            live.update(words)
    missing = {}
    for model, config in configs.items():
        if config.get("backend") != "python":
            continue
        expected = [f"{model}_{g}_{i}" for g, group in enumerate(config.get("instance_group") or [{}])
                    for i in range(int(group.get("count", 1)))]
        if gone := [name for name in expected if name not in live]:
            missing[model] = gone
    return missing


def draining() -> bool:
    """Whether the drain marker (``$TTS_TRITON_DRAIN_MARK``, default ``DEFAULT_DRAIN_MARK``) exists."""
    return os.path.exists(os.environ.get(DRAIN_MARK_ENV, DEFAULT_DRAIN_MARK))


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
    return _infer_inputs({contract.TEXT: np.array([HEALTH_TEXT.encode()], dtype=np.object_)})


def _check_network(client: grpcclient.InferenceServerClient, model: str, timeout: float) -> None:
    config = client.get_model_config(model, as_json=True, client_timeout=timeout)["config"]
    client.infer(model, _infer_inputs(smallest_inputs(config)), client_timeout=timeout)


def _check_offline(client: grpcclient.InferenceServerClient, model: str, timeout: float) -> None:
    result = client.infer(model, _text(), client_timeout=timeout)
    if result.as_numpy(contract.AUDIO).size == 0:
        raise RuntimeError("no audio")


def _check_stream(url: str, model: str, timeout: float) -> None:
    """One ``tts`` stream that must end with its FINAL within ``timeout``. It is never ended by a gRPC cancel
    (which can crash Triton 2.51): past the timeout it is stopped in band, and closed on a background thread."""
    done = threading.Event()
    errors: list[Exception] = []
    request_id = f"health-{uuid.uuid4().hex[:12]}"

    def on_response(result: Any, error: Exception | None) -> None:
        if error is not None:
            errors.append(error)
            done.set()
        elif result.get_response().id == request_id and \
                result.get_response().parameters["triton_final_response"].bool_param:
            done.set()

    client = grpcclient.InferenceServerClient(url)
    finished = False
    try:
        client.start_stream(on_response)
        client.async_stream_infer(model, _text(), request_id=request_id, enable_empty_final_response=True)
        finished = done.wait(timeout)
        if errors:
            raise errors[0]
        if not finished:
            raise TimeoutError(f"no final response within {timeout:g} s")
    finally:
        if finished or errors:
            client.close()
        else:
            threading.Thread(target=_stop_in_band, args=(client, request_id, model), daemon=True).start()


def _stop_in_band(client: grpcclient.InferenceServerClient, request_id: str, model: str) -> None:
    """Stop a health stream that outlived its check with the client library's in-band stop, then close it."""
    from tts_triton.client.grpc_client import send_stop

    with contextlib.suppress(Exception):  # a broken stream is closed below all the same
        send_stop(client, request_id, model=model)
    client.close()


def _check(url: str, model: str, timeout: float) -> ModelHealth:
    start = time.monotonic()
    run = _check_offline if model == contract.TTS_OFFLINE else _check_network
    try:
        if model == contract.TTS:
            _check_stream(url, model, timeout)
        else:
            with grpcclient.InferenceServerClient(url) as client:
                run(client, model, timeout)
    except Exception as err:  # any failure is the answer
        message = err.message() if hasattr(err, "message") and callable(err.message) else str(err)
        return ModelHealth(model, classify_error(err), time.monotonic() - start, f"{type(err).__name__}: {message}")
    return ModelHealth(model, OK, time.monotonic() - start)


def _server_pid(url: str) -> int | None:
    """The local ``tritonserver`` listening on ``url``'s port, if this process can see it."""
    port = int(url.rsplit(":", 1)[1])
    return next((pid for pid, command in port_holders(port) if command.startswith("tritonserver")), None)


def _stub_check(url: str, server_pid: int, models: Sequence[str], timeout: float) -> dict[str, list[str]]:
    try:
        with grpcclient.InferenceServerClient(url) as client:
            configs = {m: client.get_model_config(m, as_json=True, client_timeout=timeout)["config"] for m in models}
    except Exception:  # the inferences report an unreachable server or model themselves
        return {}
    return missing_stubs(server_pid, configs)


def check_health(url: str, *, timeout: float = 10.0, models: Sequence[str] = CHECKED_MODELS,
                 server_pid: int | None = None) -> HealthReport:
    """Check each of ``models`` (side by side) on the gRPC endpoint ``url`` (see the module docstring).

    ``server_pid`` is the ``tritonserver`` process whose stubs are looked for (default: the local one
    listening on ``url``'s port; none visible: only the inferences count). The whole check returns within
    about ``timeout``. Never raises for a failing server: the report says what failed.
    """
    server_pid = server_pid or _server_pid(url)
    with ThreadPoolExecutor(len(models) + 1) as pool:
        stubs = pool.submit(_stub_check, url, server_pid, models, timeout) if server_pid else None
        results = list(pool.map(lambda m: _check(url, m, timeout), models))
        missing = stubs.result() if stubs else {}
    results = [ModelHealth(r.model, DEAD, r.seconds, f"stub process {', '.join(missing[r.model])} is gone")
               if r.model in missing else r for r in results]
    return HealthReport(tuple(results))


def warm_up(url: str, *, timeout: float = 60.0, models: Sequence[str] = CHECKED_MODELS) -> HealthReport:
    """Warm a server up: :func:`check_health`'s requests (TEXT :data:`HEALTH_TEXT`, cache included where the server
    has one) sent as many times side by side as the most instances any of ``models`` has, so that each instance is
    likely to get one (Triton picks the instance); then once more, all together, to confirm. Returns that last
    report (``ok`` when every model answered within ``timeout``)."""
    try:
        with grpcclient.InferenceServerClient(url) as client:
            rounds = max(sum(g.get("count", 1) for g in client.get_model_config(m, as_json=True,
                                                                                client_timeout=timeout)
                             ["config"].get("instance_group", [{}])) for m in models)
    except Exception:  # an unreachable server: the check below says so
        rounds = 1
    if rounds > 1:
        with ThreadPoolExecutor(rounds) as pool:
            list(pool.map(lambda _: check_health(url, timeout=timeout, models=models),
                          range(rounds)))
    return check_health(url, timeout=timeout, models=models)


def main(argv: list[str] | None = None) -> int:
    """``python -m tts_triton.processes.health``: exit status 0 when the probe passes, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m tts_triton.processes.health", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_GRPC_URL, help="gRPC endpoint, host:port")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds each model may take")
    parser.add_argument("--probe", choices=("full", "liveness", "readiness", "startup"), default="full",
                        help="full: every model ok; liveness: no model dead (slow is alive; passes while "
                             "draining); readiness: every model ok and not draining; startup: warm the server "
                             "up (warm_up), then every model ok (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="print only failures")
    args = parser.parse_args(argv)
    if args.probe in ("liveness", "readiness") and draining():
        print("draining", file=sys.stdout if args.probe == "liveness" else sys.stderr)
        return 0 if args.probe == "liveness" else 1
    check = warm_up if args.probe == "startup" else check_health
    report = check(args.url, timeout=args.timeout)
    passed = report.alive if args.probe == "liveness" else report.ok
    if not args.quiet or not passed:
        print(report.summary(), file=sys.stdout if passed else sys.stderr)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
