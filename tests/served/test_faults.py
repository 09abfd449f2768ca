"""Faults on a real tritonserver: a network's Python stub killed mid-traffic.

In-flight requests get errors (streams their FINAL), the deep health check finds the model dead within
seconds, the supervisor of ``tts-triton serve`` reloads that model alone (no server restart), and no
shared-memory region is left once it stops. The stated bound: serving again within ``RECOVERY_BOUND_S`` of
the kill with the supervisor checking every second.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from conftest import pick_ports, stub_pid
from waiting import wait_until

from tts_triton.client import TTSClient
from tts_triton.core import contract
from tts_triton.processes.health import check_health
from tts_triton.processes.supervisor import Supervisor
from tts_triton.processes.triton_server import SHM_DIR, TritonServer

#: Seconds from the kill until a real request succeeds again (detection 2 x 1 s + checks + the reload).
RECOVERY_BOUND_S = 60.0
#: Seconds from the kill until the deep health check reports the model.
UNHEALTHY_BOUND_S = 15.0
LONG_TEXT = " ".join(["This sentence keeps the decoder busy for quite a while."] * 350)


class StreamWatch:
    """One ``tts`` stream on its own connection, recording chunks, errors and the FINAL flag."""

    def __init__(self, server: TritonServer, text: str) -> None:
        self.chunks = 0
        self.errors: list[str] = []
        self.first_chunk = threading.Event()
        self.final = threading.Event()
        self.final_at = 0.0
        self.errors_at_final: list[str] = []
        self.client = grpcclient.InferenceServerClient(server.grpc_url)
        self.client.start_stream(self._on_response)
        tensor = grpcclient.InferInput("TEXT", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
        self.client.async_stream_infer(contract.TTS, [tensor], enable_empty_final_response=True)

    def _on_response(self, result: Any, error: Exception | None) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        if result.as_numpy("AUDIO") is not None:
            self.chunks += 1
            self.first_chunk.set()
        if result.get_response().parameters["triton_final_response"].bool_param:
            self.final_at = time.monotonic()
            self.errors_at_final = list(self.errors)  # later ones: the open stream cut when a server stops
            self.final.set()

    def close(self) -> None:
        self.client.stop_stream(cancel_requests=True)
        self.client.close()


def failed_count(server: TritonServer) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as page:
        lines = page.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines
               if line.startswith("tts_requests_total{") and 'outcome="failed"' in line)


def offline_in_background(server: TritonServer, text: str) -> tuple[threading.Thread, list[str]]:
    errors: list[str] = []

    def run() -> None:
        tensor = httpclient.InferInput("TEXT", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
        with httpclient.InferenceServerClient(server.http_url, network_timeout=120) as http:
            try:
                http.infer(contract.TTS_OFFLINE, [tensor])
            except Exception as err:  # the expected outcome, checked by the test
                errors.append(str(err))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def serves(server: TritonServer) -> bool:
    try:
        with TTSClient(server.grpc_url, timeout=20) as tts:
            return tts.synthesize("Back again.").audio.size > 0
    except Exception:  # not yet
        return False


@pytest.mark.parametrize("model", [contract.VOCODER, contract.DECODER])
def test_killed_stub_mid_traffic_errors_then_recovers(model_repository: Path, make_triton, model: str) -> None:
    server = make_triton(model_repository)
    server.start()
    assert check_health(server.grpc_url, timeout=30).ok
    streams = [StreamWatch(server, LONG_TEXT) for _ in range(3)]
    try:
        for stream in streams:
            assert stream.first_chunk.wait(60), "a stream never started"
        offline, offline_errors = offline_in_background(server, LONG_TEXT)
        time.sleep(0.5)
        killed_at = time.monotonic()
        os.kill(stub_pid(server, model), signal.SIGKILL)

        for stream in streams:  # in flight: an error, then the FINAL flag
            assert stream.final.wait(30), "a stream in flight got no FINAL after the kill"
            assert stream.errors and "not healthy" in stream.errors[0], stream.errors
        offline.join(60)
        assert offline_errors and "not healthy" in offline_errors[0], offline_errors
        report = check_health(server.grpc_url, timeout=10)
        unhealthy_after = time.monotonic() - killed_at
        assert model in report.dead, report.summary()  # and the BLS models that call it
        assert unhealthy_after < UNHEALTHY_BOUND_S
        wait_until(lambda: failed_count(server) >= len(streams) + 1, 10, "the failed requests counted")
    finally:
        for stream in streams:
            stream.close()

    # The supervisor runs on this thread, which started the server: a server outlives only the thread that
    # started it (TritonServer), and a restart, should the reload fail, would start it anew.
    supervisor = Supervisor(server, interval=1.0, failures=2, check_timeout=10.0, log=lambda line: None)
    stop = threading.Event()
    recovered_after: list[float] = []

    def watch() -> None:
        try:
            wait_until(lambda: bool(supervisor.actions), RECOVERY_BOUND_S, "a reload")
            wait_until(lambda: serves(server), RECOVERY_BOUND_S, "serving again")
            recovered_after.append(time.monotonic() - killed_at)
        finally:
            stop.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    supervisor.run(stop)
    watcher.join()
    assert recovered_after, "not serving again"
    print(f"{model} stub killed: unhealthy after {unhealthy_after:.1f} s, serving again after "
          f"{recovered_after[0]:.1f} s (reload {supervisor.actions[0].seconds:.1f} s)")
    assert [(a.kind, a.model) for a in supervisor.actions] == [("reload", model)]
    assert recovered_after[0] < RECOVERY_BOUND_S
    assert check_health(server.grpc_url, timeout=10).ok

    assert list(SHM_DIR.glob(f"{server.shm_prefix}*")), "the server's regions should carry its prefix"
    server.stop()
    assert not list(SHM_DIR.glob(f"{server.shm_prefix}*"))


def test_no_shared_memory_left_when_the_server_is_killed(model_repository: Path, make_triton) -> None:
    """A stub killed and the server stopped without the supervisor: its region is still removed."""
    server = make_triton(model_repository)
    server.start()
    os.kill(stub_pid(server, contract.VOCODER), signal.SIGKILL)
    time.sleep(0.5)
    server.stop(timeout=5)
    assert not list(SHM_DIR.glob(f"{server.shm_prefix}*"))


def test_serve_restarts_a_killed_worker_and_leaves_nothing(model_repository: Path, tmp_path: Path) -> None:
    """`tts-triton serve` itself: a killed stub's model is reloaded, then SIGTERM leaves no process and no region."""
    ports = pick_ports()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "tts_triton.cli", "serve", "--no-build", "--model-repository",
               str(model_repository), "--http-port", str(ports.http), "--grpc-port", str(ports.grpc),
               "--metrics-port", str(ports.metrics), "--health-interval", "1"]
    with open(log, "w") as out:
        serve = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: "ready:" in log.read_text(), 120, "serve ready")
        stub = subprocess.run(["pgrep", "-f", f"tts_triton_{serve.pid}_{ports.http}_.* vocoder_0_0 "],
                              capture_output=True, text=True).stdout.split()
        assert len(stub) == 1, stub
        killed_at = time.monotonic()
        os.kill(int(stub[0]), signal.SIGKILL)
        wait_until(lambda: "vocoder reloaded" in log.read_text(), RECOVERY_BOUND_S, "serve reloading the vocoder")
        print(f"serve: serving again {time.monotonic() - killed_at:.1f} s after the kill")
        assert check_health(f"127.0.0.1:{ports.grpc}", timeout=10).ok
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
    assert serve.returncode == 0, log.read_text()
    prefix = f"tts_triton_{serve.pid}_{ports.http}_"
    assert not list(SHM_DIR.glob(f"{prefix}*"))
    assert subprocess.run(["pgrep", "-f", prefix], capture_output=True).returncode == 1, "processes left"
