"""Operations on a real tritonserver: liveness is not load, one dead model is healed alone, SIGTERM drains.

- A killed ``style_encoder`` stub under preset-voice traffic (which never calls it): the supervisor reloads
  that model alone, the streams in flight are not cut, the server is not restarted.
- ``tts-triton serve`` on SIGTERM with 4 streams in flight and one idle open stream: new requests are
  refused at once, the 4 complete, and serve exits within the drain grace plus a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
from conftest import pick_ports, stub_pid
from test_faults import StreamWatch
from tritonclient.utils import InferenceServerException
from waiting import wait_until

from tts_triton.client import ServerBusyError, TTSClient
from tts_triton.core import contract
from tts_triton.processes import health
from tts_triton.processes.health import DEAD, OK, SLOW, check_health, classify_error
from tts_triton.processes.mps import CONTROL, default_mps
from tts_triton.processes.supervisor import Supervisor
from tts_triton.processes.triton_server import SHM_DIR

#: Long enough to stream through a stub kill and a reload (tens of seconds on 2 shared cores).
STREAM_TEXT = " ".join(["This sentence keeps the decoder busy for a while."] * 30)
DRAIN_GRACE_S = 120


@pytest.mark.parametrize(
    ("error", "state"),
    [
        (TimeoutError("no final response within 10 s"), SLOW),
        (InferenceServerException("Deadline Exceeded", status="StatusCode.DEADLINE_EXCEEDED"), SLOW),
        (InferenceServerException("server busy: 64 streams in flight", status="StatusCode.RESOURCE_EXHAUSTED"), SLOW),
        (InferenceServerException("Stub process 'vocoder_0_0' is not healthy."), DEAD),
        (InferenceServerException("Request for unknown model: 'tts' has no available versions"), DEAD),
        (InferenceServerException("failed to connect to all addresses", status="StatusCode.UNAVAILABLE"), DEAD),
    ],
    ids=["timeout", "deadline", "admission", "stub", "unknown-model", "no-server"],
)
def test_errors_are_dead_but_timeouts_and_refusals_only_slow(error: Exception, state: str) -> None:
    assert classify_error(error) == state



def test_mps_is_on_by_default_for_cuda_model_processes_where_its_daemon_is_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert default_mps(None, True) == (False, f"{CONTROL} is not installed")
    (tmp_path / CONTROL).write_text("#!/bin/sh\n")
    (tmp_path / CONTROL).chmod(0o755)
    assert default_mps(None, True)[0] and not default_mps(None, False)[0]
    assert default_mps(False, True) == (False, "--no-mps") and default_mps(True, False)[0]  # asked for wins

def test_probes_while_draining(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the drain marker, liveness passes and readiness fails without asking any server."""
    monkeypatch.setenv(health.DRAIN_MARK_ENV, str(tmp_path / "draining"))
    (tmp_path / "draining").touch()
    assert health.main(["--url", "127.0.0.1:1", "--probe", "liveness"]) == 0
    assert health.main(["--url", "127.0.0.1:1", "--probe", "readiness"]) == 1
    (tmp_path / "draining").unlink()
    assert health.main(["--url", "127.0.0.1:1", "--probe", "liveness", "--timeout", "2"]) == 1  # no server: dead


@pytest.mark.slow
def test_a_dead_style_encoder_is_reloaded_alone_under_preset_traffic(model_repository: Path, make_triton) -> None:
    server = make_triton(model_repository)
    server.start()
    streams = [StreamWatch(server, STREAM_TEXT) for _ in range(3)]
    supervisor = Supervisor(server, interval=1.0, failures=2, check_timeout=10.0, log=lambda line: None)
    stop = threading.Event()
    try:
        for stream in streams:
            assert stream.first_chunk.wait(60), "a stream never started"
        old_stub = stub_pid(server, contract.STYLE_ENCODER)
        os.kill(old_stub, signal.SIGKILL)
        killed_at = time.monotonic()
        report = check_health(server.grpc_url, timeout=10, server_pid=server.pid)
        assert report.dead == [contract.STYLE_ENCODER], report.summary()

        def watch() -> None:
            try:
                wait_until(lambda: bool(supervisor.actions), 60, "a healing action")
            finally:
                stop.set()

        watcher = threading.Thread(target=watch)
        watcher.start()
        supervisor.run(stop)  # on this thread, which started the server (a restart would start it here too)
        watcher.join()
        healed_after = time.monotonic() - killed_at
        for stream in streams:
            assert stream.final.wait(180), "a stream in flight got no FINAL"
        assert [(a.kind, a.model) for a in supervisor.actions] == [("reload", contract.STYLE_ENCODER)]
        assert all(not s.errors and s.chunks > 1 for s in streams), [(s.chunks, s.errors) for s in streams]
        assert stub_pid(server, contract.STYLE_ENCODER) != old_stub
        assert check_health(server.grpc_url, timeout=10, server_pid=server.pid).ok
        print(f"style_encoder killed: reloaded {healed_after:.1f} s after the kill "
              f"(reload {supervisor.actions[0].seconds:.1f} s); 3 streams in flight completed, 0 restarts")
    finally:
        for stream in streams:
            stream.close()


def open_idle_stream(url: str) -> grpcclient.InferenceServerClient:
    """A client holding a gRPC stream open with no request on it."""
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(lambda result, error: None)
    return client


@pytest.mark.slow
def test_sigterm_drains_streams_in_flight(model_repository: Path, tmp_path: Path) -> None:
    ports = pick_ports()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "tts_triton.cli", "serve", "--no-build", "--model-repository",
               str(model_repository), "--http-port", str(ports.http), "--grpc-port", str(ports.grpc),
               "--metrics-port", str(ports.metrics), "--health-interval", "0", "--drain-grace", str(DRAIN_GRACE_S)]
    with open(log, "w") as out:
        serve = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    streams: list[StreamWatch] = []
    idle = None
    try:
        wait_until(lambda: "ready:" in log.read_text(), 120, "serve ready")

        class Server:  # what StreamWatch needs of a server
            grpc_url = f"127.0.0.1:{ports.grpc}"

        streams = [StreamWatch(Server, STREAM_TEXT) for _ in range(4)]  # type: ignore[arg-type]
        idle = open_idle_stream(Server.grpc_url)
        for stream in streams:
            assert stream.first_chunk.wait(60), "a stream never started"
        began = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        wait_until(lambda: "draining: new requests refused" in log.read_text(), 10, "the drain")
        late = StreamWatch(Server, "Too late.")  # type: ignore[arg-type]
        wait_until(lambda: late.final.is_set() or late.errors, 10, "an answer to a new request during the drain")
        assert late.errors and "no available versions" in late.errors[0], late.errors
        late.close()
        for stream in streams:
            assert stream.final.wait(DRAIN_GRACE_S), "a stream in flight got no FINAL"
        serve.wait(DRAIN_GRACE_S + 15)
        stopped_after = time.monotonic() - began
        assert all(not s.errors_at_final and s.chunks > 1 for s in streams), [(s.chunks, s.errors) for s in streams]
        assert serve.returncode == 0, log.read_text()
        last_final = max(s.final_at for s in streams) - began
        print(f"SIGTERM with 4 streams in flight and 1 idle stream: all 4 completed (last {last_final:.1f} s "
              f"after the signal), serve exited after {stopped_after:.1f} s")
        assert stopped_after < last_final + 10  # exits promptly once drained: idle streams do not hold it
        prefix = f"tts_triton_{serve.pid}_{ports.http}_"
        assert not list(SHM_DIR.glob(f"{prefix}*"))
        assert subprocess.run(["pgrep", "-f", prefix], capture_output=True).returncode == 1, "processes left"
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        # after a failure: its server would otherwise run on, loading the machine, until its exit timeout
        subprocess.run(["pkill", "-KILL", "-f", f"tts_triton_{serve.pid}_{ports.http}_"])
        for stream in streams:
            stream.close()
        if idle is not None:
            idle.stop_stream()
            idle.close()


def exited(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie (whose command line is empty, as the stub check reads it)."""
    try:
        return not Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def test_dead_is_found_by_the_missing_stub(model_repository: Path, make_triton) -> None:
    """A dead BLS stub never answers its stream: the stub check calls it dead, not slow."""
    server = make_triton(model_repository)
    server.start()
    stub = stub_pid(server, contract.TTS)
    os.kill(stub, signal.SIGKILL)
    wait_until(lambda: exited(stub), 10, "the killed stub's exit")  # on a loaded host it takes a moment
    report = check_health(server.grpc_url, timeout=5, server_pid=server.pid)
    states = {m.model: m.state for m in report.models}
    assert states[contract.TTS] == DEAD and "tts_0_0 is gone" in report.models[-1].error, report.summary()
    assert states[contract.VOCODER] == OK


#: Concurrent streams of the overload test: twice the CPU targets' admission bound (max_streams 32).
OVERLOAD_STREAMS = 64


@pytest.mark.slow
def test_64_streams_with_self_healing_on_restart_nothing(model_repository: Path, make_triton) -> None:
    """64 streams at once on this machine with the supervisor checking every 2 s: nothing is restarted or
    reloaded, the excess is refused at once (admission control), the rest is served."""
    server = make_triton(model_repository)
    server.start()
    said: list[str] = []
    supervisor = Supervisor(server, interval=2.0, failures=2, check_timeout=5.0, log=said.append)
    results: list[tuple[str, float]] = []
    stop = threading.Event()

    def one(text: str) -> None:
        began = time.monotonic()
        try:
            with TTSClient(server.grpc_url, timeout=240, retries=0) as client:
                client.synthesize(text)
            results.append(("served", time.monotonic() - began))
        except ServerBusyError:
            results.append(("refused", time.monotonic() - began))
        except Exception as err:  # counted: the test fails on any
            results.append((f"failed: {err}", time.monotonic() - began))

    def load() -> None:
        try:
            threads = [threading.Thread(target=one, args=(f"Stream {i} speaks two sentences. {STREAM_TEXT[:120]}",))
                       for i in range(OVERLOAD_STREAMS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            time.sleep(2 * supervisor.interval)  # a last check or two after the load
        finally:
            stop.set()

    loader = threading.Thread(target=load)
    loader.start()
    supervisor.run(stop)
    loader.join()
    outcomes = [kind for kind, _ in results]
    refused = [s for kind, s in results if kind == "refused"]
    served = [s for kind, s in results if kind == "served"]
    overloaded = [line for line in said if line.startswith("overloaded")]
    print(f"{OVERLOAD_STREAMS} streams: {len(served)} served (slowest {max(served, default=0):.1f} s), "
          f"{len(refused)} refused (slowest refusal {max(refused, default=0):.2f} s), "
          f"{len(supervisor.actions)} healing actions; {len(overloaded)} checks found slow models {overloaded[:1]}")
    assert supervisor.actions == [], supervisor.actions
    assert len(results) == OVERLOAD_STREAMS and set(outcomes) <= {"served", "refused"}, outcomes
    assert served and refused
    assert max(refused) < 5.0  # refused at once, not after a slow stream
