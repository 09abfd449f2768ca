"""TritonServer against the real tritonserver 2.51 from the nvidia-pytriton wheel, with a Python-backend model."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tts_triton.processes import triton_server as server_module
from tts_triton.processes.triton_install import TritonNotFoundError, TritonServerError, find_triton, prepare_backends
from tts_triton.processes.triton_server import (
    PortInUseError,
    TritonServer,
    free_port,
    port_holders,
)

ADD_ONE_CONFIG = """\
name: "add_one"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

ADD_ONE_MODEL = """\
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        {initialize}
        pb_utils.Logger.log_info(f"add_one prefix={{sys.prefix}} numpy={{np.__version__}}")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x + np.float32(1))]))
        return responses

    def finalize(self):
        {finalize}
"""


def write_add_one(
    repo: Path, *, initialize: str = "pass", finalize: str = "pass", config: str = ADD_ONE_CONFIG
) -> Path:
    """Write an ``add_one`` model (FP32 [-1] -> x + 1) into ``repo``. ``initialize`` and ``finalize`` are
    one line of code each, run first when the model loads and when it unloads."""
    (repo / "add_one" / "1").mkdir(parents=True)
    (repo / "add_one" / "config.pbtxt").write_text(config)
    (repo / "add_one" / "1" / "model.py").write_text(ADD_ONE_MODEL.format(initialize=initialize, finalize=finalize))
    return repo


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited while we looked
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def group_exits(pgid: int, within: float = 5.0) -> bool:
    """Whether the process group ``pgid`` is empty, waiting up to ``within`` seconds: SIGKILL is
    delivered asynchronously, so a killed stub can outlive ``stop()`` by a moment."""
    deadline = time.monotonic() + within
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(scope="module")
def add_one_server(
    start_triton: Callable[..., TritonServer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    server = start_triton(write_add_one(tmp_path_factory.mktemp("repo")))
    yield server
    server.stop()


def test_find_triton_matches_this_python() -> None:
    install = find_triton()
    assert install.missing() == []
    assert install.stub.parent.name == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert os.access(install.server, os.X_OK)


def test_find_triton_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TritonNotFoundError, match=r"pip install nvidia-pytriton==0\.7\.0"):
        find_triton()


def test_prepare_backends_rebuilds_an_incomplete_directory(tmp_path: Path) -> None:
    install = find_triton()
    backends = prepare_backends(install, tmp_path / "backends")
    stub = backends / "python" / "triton_python_backend_stub"
    assert os.access(stub, os.X_OK)
    stub.write_bytes(b"truncated")
    assert prepare_backends(install, backends) == backends
    assert stub.stat().st_size == install.stub.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backends"]  # no staging directory left


def test_stop_signals_caught_while_the_server_forks_are_delivered_after() -> None:
    """A handler that raises must not run inside the body (it would lose the forked child): it runs, in the order
    the signals came, once the body is done, and the previous handlers are back."""
    ran: list[str] = []

    def interrupt(*_: object) -> None:
        ran.append("SIGINT")
        raise KeyboardInterrupt

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, interrupt)
        signal.signal(signal.SIGTERM, lambda *_: ran.append("SIGTERM"))
        with pytest.raises(KeyboardInterrupt), server_module._stop_signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # bytecodes at which a pending handler would run
                time.sleep(0)
            ran.append("body done")
        assert ran == ["body done", "SIGINT", "SIGTERM"]
        assert signal.getsignal(signal.SIGINT) is interrupt
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_http_infer(add_one_server: TritonServer) -> None:
    client = httpclient.InferenceServerClient(add_one_server.http_url)
    x = np.array([[0.5, 1.0, -2.0]], dtype=np.float32)
    inp = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer("add_one", [inp])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + 1)


def test_grpc_infer(add_one_server: TritonServer) -> None:
    with grpcclient.InferenceServerClient(add_one_server.grpc_url) as client:
        x = np.arange(10, dtype=np.float32).reshape(2, 5)
        inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer("add_one", [inp])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + 1)


def test_concurrent_requests_are_batched(add_one_server: TritonServer) -> None:
    def counts() -> tuple[int, int]:
        stats = client.get_inference_statistics("add_one")["model_stats"][0]
        return int(stats["inference_count"]), int(stats["execution_count"])

    client = httpclient.InferenceServerClient(add_one_server.http_url, concurrency=8)
    inferences_before, executions_before = counts()
    pending = []
    for i in range(8):
        inp = httpclient.InferInput("INPUT0", [1, 4], "FP32")
        inp.set_data_from_numpy(np.full((1, 4), i, dtype=np.float32))
        pending.append(client.async_infer("add_one", [inp]))
    for i, request in enumerate(pending):
        np.testing.assert_array_equal(request.get_result(timeout=30).as_numpy("OUTPUT0"), np.full((1, 4), i + 1))
    inferences, executions = counts()
    client.close()
    assert inferences - inferences_before == 8
    assert executions - executions_before < 8  # the dynamic batcher merged requests


def test_models_run_in_this_environment(add_one_server: TritonServer) -> None:
    assert f"add_one prefix={sys.prefix} numpy={np.__version__}" in add_one_server.log_tail(1000)


def test_metrics_endpoint(add_one_server: TritonServer) -> None:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(add_one_server.metrics_url) as page:
        assert 'nv_inference_count{model="add_one"' in page.read().decode()


def listening_ipv4(port: int) -> set[str]:
    """IPv4 addresses (hex, as in /proc/net/tcp) of the TCP sockets listening on ``port``; an IPv6
    socket counts by its IPv4-mapped address (``::ffff:a.b.c.d``) or as its full hex address."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address.removeprefix("0000000000000000FFFF0000"))
    return found


def test_a_cpu_hosts_log_has_no_gpu_pool_or_metrics_errors(add_one_server: TritonServer) -> None:
    """Where there is no GPU, the server sets up no pinned or CUDA memory pool and no GPU metrics, rather than
    logging that it could not (what remains: "CudaDriverHelper has not been initialized", docs/operations.md)."""
    if server_module.NVIDIA_CONTROL_DEVICE.exists():
        pytest.skip("a GPU host: Triton sets up its pools and GPU metrics")
    log = add_one_server.log_tail(400)
    assert "Started GRPCInferenceService" in log
    assert [phrase for phrase in ("pinned memory pool will not be available", "Failed to initialize NVML",
                                  "DCGM unable to start") if phrase in log] == []


def test_binds_loopback_only(add_one_server: TritonServer) -> None:
    loopback = "0100007F"  # 127.0.0.1, little-endian hex
    for port in (add_one_server.http_port, add_one_server.grpc_port, add_one_server.metrics_port):
        assert listening_ipv4(port) == {loopback}


@pytest.mark.parametrize(
    ("initialize", "config", "expected"),
    [
        ('raise ValueError("deliberately broken model")', ADD_ONE_CONFIG, "deliberately broken model"),
        ("pass", 'name: "add_one" backend: "python" input [', "failed to read text proto"),
    ],
    ids=["initialize-raises", "malformed-config"],
)
def test_bad_repository_fails_fast_with_the_server_log(
    tmp_path: Path, make_triton: Callable[..., TritonServer], initialize: str, config: str, expected: str
) -> None:
    server = make_triton(write_add_one(tmp_path / "repo", initialize=initialize, config=config))
    with pytest.raises(TritonServerError) as failure:
        server.start()
    message = str(failure.value)
    assert "tritonserver exited with code 1" in message
    assert expected in message
    assert "failed to load all models" in message
    assert server.pid is not None and group_exits(server.pid)


def test_missing_repository_is_reported(tmp_path: Path) -> None:
    with pytest.raises(TritonServerError, match="is not a directory"):
        TritonServer(tmp_path / "nope").start()


def test_readiness_timeout_stops_the_server(tmp_path: Path, make_triton: Callable[..., TritonServer]) -> None:
    server = make_triton(write_add_one(tmp_path / "repo", initialize="import time; time.sleep(60)"))
    with pytest.raises(TritonServerError, match=r"not ready after 1 s(.|\n)*loading: add_one"):
        server.start(timeout=1)
    assert server.pid is not None and group_exits(server.pid)


def test_stop_leaves_no_process_behind_and_keeps_the_log(
    tmp_path: Path, make_triton: Callable[..., TritonServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # default log and backends go here
    logs = tmp_path / "cache" / "tts-triton" / "logs"
    logs.mkdir(parents=True)
    old, recent = logs / "tritonserver-8000-1.log", logs / "tritonserver-8000-2.log"
    for log in (old, recent):
        log.write_text("an earlier server\n")
    os.utime(old, (time.time() - 15 * 24 * 3600,) * 2)
    server = make_triton(write_add_one(tmp_path / "repo"), log_file=None)
    with server:
        assert not old.exists() and recent.exists()  # logs untouched for two weeks are pruned
        assert server.pid is not None
        members = group_members(server.pid)
        assert server.pid in members and len(members) >= 2  # the server and the model's backend stub
    assert server.stop() == 0  # graceful exit; stop() is idempotent
    assert group_exits(server.pid)
    with socket.create_server(("127.0.0.1", server.http_port)):  # the port is free again
        pass
    assert server.log_file == logs / f"tritonserver-{server.http_port}-{os.getpid()}.log"  # one per owner
    assert "successfully unloaded 'add_one'" in server.log_tail()
    server.start()  # a restart appends to the log; the log methods read only the latest run
    previous = signal.signal(signal.SIGALRM, lambda *_: server.stop())  # as `serve` does on SIGTERM
    try:
        signal.alarm(1)
        assert server.wait() == 0  # the handler's stop() ran while wait() was blocking
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert group_exits(server.pid)
    assert server.log_file.read_text().count("successfully unloaded 'add_one'") == 2
    assert server.log_tail(10_000).count("successfully unloaded 'add_one'") == 1
    backends = f"backends-{server.install.version}-py{sys.version_info.major}.{sys.version_info.minor}"
    assert (tmp_path / "cache" / "tts-triton" / backends / "python" / "triton_python_backend_stub").is_file()


def test_stop_kills_a_backend_stub_that_hangs(tmp_path: Path, make_triton: Callable[..., TritonServer]) -> None:
    repo = write_add_one(tmp_path / "repo", finalize="import time; time.sleep(120)")
    server = make_triton(repo, extra_args=["--exit-timeout-secs=1"])
    server.start()
    began = time.monotonic()
    assert server.stop() != 0  # Triton gave up waiting for the model to unload
    assert time.monotonic() - began < 15
    assert server.pid is not None and group_exits(server.pid)


def test_busy_port_is_refused_in_one_line_naming_its_holder(
    tmp_path: Path, make_triton: Callable[..., TritonServer]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        assert port_holders(port) == [(os.getpid(), port_holders(port)[0][1])]
        server = make_triton(write_add_one(tmp_path / "repo"), grpc_port=port)
        began = time.monotonic()
        with pytest.raises(PortInUseError) as refused:
            server.start()
    assert time.monotonic() - began < 2
    message = str(refused.value)
    assert "\n" not in message and refused.value.port == port
    assert message.startswith(f"gRPC port {port} on 127.0.0.1 is in use by pid {os.getpid()} (")
    assert server.pid is None  # nothing was started
    assert not server.log_file.exists()


def test_second_server_on_busy_ports_names_the_first_and_leaves_its_log_alone(
    add_one_server: TritonServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    log_before = add_one_server.log_file.read_bytes()
    second = TritonServer(write_add_one(tmp_path / "repo"), http_port=free_port(), grpc_port=add_one_server.grpc_port,
                          metrics_port=free_port())
    with pytest.raises(PortInUseError, match=rf"^gRPC port {add_one_server.grpc_port} .* by pid {add_one_server.pid} "
                                            r"\(tritonserver --model-repository="):
        second.start()
    assert second.log_file != add_one_server.log_file
    assert add_one_server.log_file.read_bytes() == log_before
    assert add_one_server.listens() and not add_one_server.listens(os.getpid())


def test_same_port_twice_is_refused(tmp_path: Path, make_triton: Callable[..., TritonServer]) -> None:
    port = free_port()
    server = make_triton(write_add_one(tmp_path / "repo"), http_port=port, metrics_port=port)
    with pytest.raises(PortInUseError, match=f"metrics port {port} is also given as the HTTP port"):
        server.start()


OWNER = """\
import sys, time
from pathlib import Path
from tts_triton.processes.triton_server import TritonServer
server = TritonServer(Path(sys.argv[1]), http_port=int(sys.argv[2]), grpc_port=int(sys.argv[3]),
                      metrics_port=int(sys.argv[4]), log_file=Path(sys.argv[5]), extra_args=["--exit-timeout-secs=2"])
server.start()
print(server.pid, flush=True)
time.sleep(600)
"""


def test_server_dies_with_a_killed_owner(tmp_path: Path) -> None:
    """SIGKILL of the owning process (no handler, no ``stop``) still ends the server: PR_SET_PDEATHSIG."""
    ports = [str(free_port()) for _ in range(3)]
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(write_add_one(tmp_path / "repo")), *ports,
                              str(tmp_path / "owner.log")], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pid = int(owner.stdout.readline())
        assert group_members(pid)
    finally:
        owner.kill()
        owner.wait()
    assert group_exits(pid, within=20)
    for port in ports:
        with socket.create_server(("127.0.0.1", int(port))):  # every port is free again
            pass


def test_readiness_is_never_taken_from_another_server(
    add_one_server: TritonServer, tmp_path: Path, make_triton: Callable[..., TritonServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A port taken between the check and the bind: the first server answers /v2/health/ready on it, but
    readiness counts only from the server's own child, which fails to bind and exits."""
    monkeypatch.setattr(server_module, "check_ports", lambda host, ports: None)
    second = make_triton(write_add_one(tmp_path / "repo"), http_port=add_one_server.http_port)
    refused = r"tritonserver exited with code 1(.|\n)*failed to start HTTP service.*already in use"
    with pytest.raises(TritonServerError, match=refused):
        second.start(timeout=60)
    assert add_one_server.is_running()
