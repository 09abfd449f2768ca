"""Shared fixtures: free loopback ports, and real Triton servers started for a test's model repository."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tts_triton.server import TritonServer, free_port


@dataclass(frozen=True)
class TritonPorts:
    """Three distinct TCP ports that were free on 127.0.0.1 when picked."""

    http: int
    grpc: int
    metrics: int

    def kwargs(self) -> dict[str, int]:
        """Keyword arguments for ``TritonServer``."""
        return {"http_port": self.http, "grpc_port": self.grpc, "metrics_port": self.metrics}


def pick_ports() -> TritonPorts:
    """Three distinct free loopback ports."""
    ports: list[int] = []
    while len(ports) < 3:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return TritonPorts(*ports)


def new_server(model_repository: Path, log_file: Path | None, **kwargs: Any) -> TritonServer:
    """A ``TritonServer`` (not started) on free loopback ports logging to ``log_file``; ``kwargs`` override."""
    return TritonServer(model_repository, **{"log_file": log_file, **pick_ports().kwargs(), **kwargs})


@pytest.fixture
def make_triton(tmp_path: Path) -> Iterator[Callable[..., TritonServer]]:
    """``make_triton(model_repository, **kwargs) -> TritonServer``: a server on free loopback ports, not started.

    ``kwargs`` go to ``TritonServer``; its log is ``tmp_path/triton-<n>.log``. Stopped after the test.
    """
    servers: list[TritonServer] = []

    def make(model_repository: Path, **kwargs: Any) -> TritonServer:
        server = new_server(model_repository, tmp_path / f"triton-{len(servers)}.log", **kwargs)
        servers.append(server)
        return server

    yield make
    for server in reversed(servers):
        server.stop()


@pytest.fixture(scope="session")
def start_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., TritonServer]]:
    """``start_triton(model_repository, **kwargs) -> TritonServer``: a server on free loopback ports, ready.

    ``kwargs`` go to ``TritonServer``; the log is kept in pytest's temporary directory. Every server
    is stopped at the end of the session; a module-scoped fixture may ``stop()`` its server earlier.
    """
    servers: list[TritonServer] = []

    def start(model_repository: Path, **kwargs: Any) -> TritonServer:
        server = new_server(model_repository, tmp_path_factory.mktemp("triton-log") / "server.log", **kwargs)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in reversed(servers):
        server.stop()
