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


#: Seconds a stopping test server waits for in-flight work and model unloading (Triton's default: 30).
EXIT_TIMEOUT_S = 5


def new_server(model_repository: Path, **kwargs: Any) -> TritonServer:
    """A ``TritonServer`` (not started) on free loopback ports; ``kwargs`` go to ``TritonServer`` and win.

    ``extra_args`` are appended to ``--exit-timeout-secs=EXIT_TIMEOUT_S``, so that a model that does not
    unload costs a test seconds, not half a minute.
    """
    kwargs["extra_args"] = [f"--exit-timeout-secs={EXIT_TIMEOUT_S}", *kwargs.get("extra_args", ())]
    return TritonServer(model_repository, **{**pick_ports().kwargs(), **kwargs})


@pytest.fixture
def make_triton(tmp_path: Path) -> Iterator[Callable[..., TritonServer]]:
    """``make_triton(model_repository, **kwargs) -> TritonServer``: a server on free loopback ports, not started.

    ``kwargs`` go to ``TritonServer``; its log is ``tmp_path/triton-<n>.log``. Stopped after the test.
    """
    servers: list[TritonServer] = []

    def make(model_repository: Path, **kwargs: Any) -> TritonServer:
        kwargs.setdefault("log_file", tmp_path / f"triton-{len(servers)}.log")
        server = new_server(model_repository, **kwargs)
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
        kwargs.setdefault("log_file", tmp_path_factory.mktemp("triton-log") / "server.log")
        server = new_server(model_repository, **kwargs)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in reversed(servers):
        server.stop()


# --- The model under test: seeded weights with a calibrated stop gate, exported and served once. ---

SENTENCE_IDS = [1, *range(20, 52), 2]
STOP_STEP = 21


@pytest.fixture(scope="session")
def test_style() -> Any:
    import numpy as np

    return np.random.default_rng(0).standard_normal(128).astype(np.float32) * 0.3


@pytest.fixture(scope="session")
def checkpoint(test_style: Any) -> Any:
    """Seeded weights whose gate bias is shifted so that decoding stops near STOP_STEP.

    Untrained gates barely move from step to step, so without this the stop rule would fire at
    step 0 or never. Tests that compare implementations use it to exercise the stop rule.
    """
    import torch

    from tts_triton import contract
    from tts_triton.checkpoint import init_checkpoint

    ckpt = init_checkpoint(seed=7)
    stages = ckpt.stages()
    with torch.no_grad():
        phonemes = torch.tensor([SENTENCE_IDS], dtype=torch.int32)
        mask = torch.ones(phonemes.shape)
        memory, processed = stages[contract.TEXT_ENCODER](phonemes, mask)
        decoder = stages[contract.DECODER].decoder
        _, gate, _, _ = decoder.run(decoder.initial_state(memory), STOP_STEP + 1, memory, processed, mask,
                                    torch.from_numpy(test_style)[None])
        ckpt.acoustic.decoder.gate.bias -= float(gate[0, STOP_STEP]) - 1e-6
    return ckpt


@pytest.fixture(scope="session")
def checkpoint_file(checkpoint: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ckpt") / "calibrated-seed7.pt"
    checkpoint.save(path)
    return path


@pytest.fixture(scope="session")
def model_repository(checkpoint_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full onnxruntime-python repository (networks, encode, tts, tts_offline) of ``checkpoint``."""
    from tts_triton.build import ensure_repository

    root = tmp_path_factory.mktemp("repo")
    return ensure_repository(root / "model_repository", checkpoint=checkpoint_file, cache=root / "cache",
                             progress=False)


@pytest.fixture(scope="session")
def onnx_dir(model_repository: Path) -> Path:
    """The ONNX files the repository was built from."""
    return next(model_repository.parent.glob("cache/*/onnx"))
