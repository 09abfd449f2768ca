"""Per-model control of a running :class:`~tts_triton.processes.triton_server.TritonServer` (explicit model control
mode).

Two operations the server as a whole cannot give:
- :func:`reload_model` heals one model whose Python stub died: Triton's ``load`` of a loaded model whose
  files did not change is a no-op (measured on 2.51), so the load carries the model's own config with one
  extra parameter (``RELOAD_PARAMETER``, a fresh value each time). Triton then loads a new instance beside
  the old one and swaps them: requests to other models, and to the ensembles over it, are not interrupted.
- :func:`drain` ends service gracefully: it unloads the public models (``tts``, ``tts_offline``), which makes
  Triton refuse new requests to them at once ("Request for unknown model: 'tts' has no available versions")
  while the streams in flight finish, their child calls included (Triton told to stop by SIGTERM would
  refuse those), and returns once the BLS's ``tts_active_requests`` gauge is 0 or the grace period ends
  (its two steps: :func:`refuse_new_requests`, :func:`wait_idle`).

Every call goes to the server's HTTP endpoint with the admin header (model control is a restricted API);
the functions take a :class:`~tts_triton.processes.triton_server.TritonServer` or an :class:`Endpoint` (a server this
process did not start, e.g. in the chart's preStop hook)::

    python -m tts_triton.processes.model_control drain --http 127.0.0.1:8000 --metrics 127.0.0.1:8002 --grace 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tts_triton.core import contract
from tts_triton.core.contract import ACTIVE_METRIC
from tts_triton.processes.health import DEFAULT_DRAIN_MARK, DRAIN_MARK_ENV
from tts_triton.processes.triton_install import TritonServerError
from tts_triton.processes.triton_server import ADMIN_HEADER

__all__ = ["ACTIVE_METRIC", "PUBLIC_MODELS", "RELOAD_PARAMETER", "Endpoint", "active_requests", "drain", "main",
           "model_states", "refuse_new_requests", "reload_model", "unload_model", "wait_idle"]

#: Config parameter whose fresh value makes Triton reload a model whose files are unchanged; models ignore it.
RELOAD_PARAMETER = "tts_triton_reload"
#: The models clients call; unloading them stops new work while the models they call keep serving.
PUBLIC_MODELS = (contract.TTS, contract.TTS_OFFLINE)
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
#: Environment variable holding the admin key (the chart's and `serve`'s).
ADMIN_KEY_ENV = "TTS_TRITON_ADMIN_KEY"


class Server(Protocol):
    """What the functions here need of a server: a :class:`~tts_triton.processes.triton_server.TritonServer` has it."""

    @property
    def http_url(self) -> str: ...

    @property
    def metrics_url(self) -> str: ...

    def admin_headers(self, *, grpc: bool = False) -> dict[str, str]: ...


@dataclass(frozen=True)
class Endpoint:
    """A running server by its HTTP ``host:port``, metrics URL and admin key."""

    http_url: str
    metrics_url: str
    admin_key: str

    def admin_headers(self, *, grpc: bool = False) -> dict[str, str]:
        return {("triton-grpc-protocol-" if grpc else "") + ADMIN_HEADER: self.admin_key}


def _request(server: Server, path: str, body: dict[str, Any] | None = None, timeout: float = 60) -> bytes:
    """POST (with ``body``) or GET ``path`` on the server's HTTP port with the admin header."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=data, headers=server.admin_headers(),
                                     method="GET" if body is None else "POST")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as err:
        raise TritonServerError(f"{path}: HTTP {err.code}: {err.read().decode(errors='replace')}") from None
    except (urllib.error.URLError, OSError) as err:
        raise TritonServerError(f"{path}: {err}") from None


def model_states(server: Server) -> dict[str, str]:
    """``model -> state`` from the repository index (``READY``, ``UNLOADING``, ``UNAVAILABLE``, ...)."""
    return {entry["name"]: entry.get("state", "") for entry in json.loads(_request(server, "/v2/repository/index", {}))}


def reload_model(server: Server, model: str, timeout: float = 120) -> float:
    """Load a fresh instance of ``model`` (new stub processes) and swap it in; return the seconds it took.

    Raises ``TritonServerError`` when Triton refuses or the load fails (the old instance then stays)."""
    began = time.monotonic()
    config = json.loads(_request(server, f"/v2/models/{model}/config", timeout=timeout))
    config.setdefault("parameters", {})[RELOAD_PARAMETER] = {"string_value": f"{time.time():.6f}"}
    _request(server, f"/v2/repository/models/{model}/load", {"parameters": {"config": json.dumps(config)}},
             timeout=timeout)
    return time.monotonic() - began


def unload_model(server: Server, model: str) -> None:
    """Ask Triton to unload ``model``: new requests are refused at once, those in flight finish first."""
    _request(server, f"/v2/repository/models/{model}/unload", {})


def active_requests(server: Server, models: Sequence[str] = PUBLIC_MODELS) -> int:
    """Requests in progress in ``models`` by the BLS's gauge (0 once a model's gauge is gone)."""
    with _OPENER.open(server.metrics_url, timeout=10) as page:
        lines = page.read().decode().splitlines()
    total = 0.0
    for line in lines:
        if line.startswith(ACTIVE_METRIC + "{") and any(f'model="{m}"' in line for m in models):
            total += float(line.rsplit(" ", 1)[1])
    return round(total)


def refuse_new_requests(server: Server, models: Sequence[str] = PUBLIC_MODELS) -> None:
    """Unload ``models``: once this returns, Triton refuses every new request to them ("... has no available
    versions"), while those in flight finish."""
    for model in models:
        unload_model(server, model)


def wait_idle(server: Server, grace: float, *, models: Sequence[str] = PUBLIC_MODELS, log: Any = print) -> int:
    """Wait up to ``grace`` seconds for the requests in flight in ``models`` to finish; return how many were
    still running at the end (0: all finished)."""
    deadline = time.monotonic() + grace
    running = -1
    while True:
        try:
            now = active_requests(server, models)
        except OSError as err:
            log(f"drain: metrics unreadable ({err}); stopping now")
            return running if running > 0 else 0
        if now != running:
            log(f"drain: {now} request(s) in flight" + ("" if now == 0 else f", waiting up to {grace:.0f} s"))
            running = now
        if now == 0 or time.monotonic() >= deadline:
            return now
        time.sleep(0.2)


def drain(server: Server, grace: float, *, models: Sequence[str] = PUBLIC_MODELS,
          log: Any = print) -> int:
    """Refuse new requests to ``models`` and wait up to ``grace`` seconds for those in flight; return how many
    were still running at the end (0: all finished). The server keeps running: stop it afterwards."""
    refuse_new_requests(server, models)
    return wait_idle(server, grace, models=models, log=log)


def main(argv: list[str] | None = None) -> int:
    """``python -m tts_triton.processes.model_control drain|reload``: the preStop hook's drain, an operator's reload."""
    parser = argparse.ArgumentParser(prog="python -m tts_triton.processes.model_control",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("drain", "reload"))
    parser.add_argument("models", nargs="*", help="reload: the models to reload")
    parser.add_argument("--http", default="127.0.0.1:8000", help="HTTP endpoint, host:port (default %(default)s)")
    parser.add_argument("--metrics", default="127.0.0.1:8002", help="metrics endpoint (default %(default)s)")
    parser.add_argument("--grace", type=float, default=60.0, help="drain: seconds for the requests in flight")
    parser.add_argument("--delay", type=float, default=0.0,
                        help="drain: seconds to keep serving after marking the pod not ready (endpoints update)")
    args = parser.parse_args(argv)
    endpoint = Endpoint(args.http, f"http://{args.metrics}/metrics", os.environ.get(ADMIN_KEY_ENV, ""))
    try:
        if args.action == "reload":
            for model in args.models:
                print(f"{model} reloaded in {reload_model(endpoint, model):.1f} s")
            return 0
        mark = Path(os.environ.get(DRAIN_MARK_ENV, DEFAULT_DRAIN_MARK))
        mark.touch()  # readiness fails from now on, liveness passes
        time.sleep(args.delay)
        left = drain(endpoint, args.grace)
    except TritonServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0 if left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
