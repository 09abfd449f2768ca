"""MpsDaemon and TritonServer(mps=True) against a stand-in ``nvidia-cuda-mps-control`` (CI has no GPU driver):
the daemon is started with private folders, its clients get them, ``stop`` sends ``quit`` to the same daemon."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tts_triton.processes.mps import CONTROL, MpsDaemon, MpsError
from tts_triton.processes.triton_install import TritonServerError
from tts_triton.processes.triton_server import TritonServer, free_ports

FAKE = """#!/bin/sh
echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY stdin=$( [ "$1" = -d ] || cat )" >> "{record}"
exit {status}
"""


def fake_control(folder: Path, status: int = 0) -> Path:
    record = folder / "calls.txt"
    script = folder / CONTROL
    script.write_text(FAKE.format(record=record, status=status))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return record


def test_daemon_gets_private_folders_and_quits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = fake_control(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    daemon = MpsDaemon(tmp_path / "mps")
    env = daemon.start()
    assert env == {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "mps" / "pipe"),
                   "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "mps" / "log")}
    assert all(Path(folder).is_dir() for folder in env.values())
    daemon.stop()
    daemon.stop()  # idempotent: one quit
    calls = record.read_text().splitlines()
    pipe, log = env["CUDA_MPS_PIPE_DIRECTORY"], env["CUDA_MPS_LOG_DIRECTORY"]
    assert calls == [f"args=-d pipe={pipe} log={log} stdin=", f"args= pipe={pipe} log={log} stdin=quit"]


def test_a_failing_or_missing_daemon_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_control(tmp_path, status=1)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(MpsError, match="-d failed"):
        MpsDaemon(tmp_path / "mps").start()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(MpsError, match="NVIDIA_DRIVER_CAPABILITIES"):
        MpsDaemon().start()


def test_server_passes_the_daemon_to_its_models(model_repository: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    record = fake_control(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    server = TritonServer(model_repository, mps=True)
    server._mps.root = tmp_path / "mps"  # a known place instead of a new temp folder
    server._mps.start()
    assert server.environment()["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "mps" / "pipe")
    server._proc = None
    server.stop()  # never started a server: still quits the daemon
    assert record.read_text().splitlines()[-1].endswith("stdin=quit")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    ports = free_ports(3)
    with pytest.raises(TritonServerError, match=CONTROL):
        TritonServer(model_repository, mps=True, http_port=ports[0], grpc_port=ports[1], metrics_port=ports[2]).start()
