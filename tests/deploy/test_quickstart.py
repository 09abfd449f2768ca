"""scripts/quickstart.sh from a clean copy of the checkout: it exits 0 with a WAV and leaves nothing running.

The copy holds the files git tracks (and untracked, not ignored ones), as a fresh clone would, plus a link
to this checkout's ``.venv`` (so ``setup.sh`` finds it up to date instead of installing for minutes). The
server serves the test model repository (``--no-build``) on free ports passed through to ``serve``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf
from conftest import TritonPorts, like_a_terminal, pick_ports

from tts_triton.processes.triton_server import port_holders

ROOT = Path(__file__).resolve().parents[2]


def clean_copy(dest: Path) -> Path:
    """The checkout's files as a clone has them, with ``.venv`` linked (only when it is up to date: the copy's
    ``setup.sh`` would otherwise reinstall the package into it from the copy)."""
    if subprocess.run(["bash", "scripts/setup.sh", "--check"], cwd=ROOT).returncode != 0:
        pytest.fail(".venv is not set up for this checkout as it is (pyproject.toml or setup.sh changed since): run "
                    "`bash scripts/setup.sh` first")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    (dest / ".venv").symlink_to(Path(sys.prefix))
    return dest


def processes_mentioning(*needles: str) -> list[str]:
    """Command lines of live processes that contain any of ``needles``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(needle in text for needle in needles):
            found.append(text)
    return found


def serve_args(model_repository: Path, ports: TritonPorts) -> list[str]:
    return ["--model-repository", str(model_repository), "--no-build", "--http-port", str(ports.http),
            "--grpc-port", str(ports.grpc), "--metrics-port", str(ports.metrics)]


def our_processes(copy: Path, ports: TritonPorts) -> list[str]:
    """Command lines of the copy's processes: `serve` (``--grpc-port N``), tritonserver (``--grpc-port=N``) and
    its Python backend stubs, whose command line carries the shared-memory prefix ``tts_triton_<pid>_<http>_``
    (a stub outlives a server killed by SIGKILL)."""
    stub = re.compile(rf"tts_triton_\d+_{ports.http}_")
    found = processes_mentioning(str(copy), f"--grpc-port {ports.grpc}", f"--grpc-port={ports.grpc}")
    return found + [line for line in processes_mentioning("triton_python_backend_stub") if stub.search(line)]


def assert_nothing_left(copy: Path, ports: TritonPorts) -> None:
    assert our_processes(copy, ports) == []
    for port in (ports.http, ports.grpc, ports.metrics):
        assert port_holders(port) == []


def test_quickstart_exits_with_a_wav_and_leaves_nothing_behind(model_repository: Path, tmp_path: Path) -> None:
    copy = clean_copy(tmp_path / "clone")
    ports = pick_ports()
    args = serve_args(model_repository, ports)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    began = time.monotonic()
    run = subprocess.run(["bash", "scripts/quickstart.sh", "Hello from the quickstart.", *args], cwd=copy, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"ready on 127.0.0.1:{ports.grpc}" in run.stdout
    audio, rate = sf.read(copy / "hello.wav")
    assert rate == 22050 and len(audio) > 0
    assert time.monotonic() - began < 240
    assert_nothing_left(copy, ports)


def start_quickstart(copy: Path, model_repository: Path, ports: TritonPorts, cache: Path) -> subprocess.Popen[str]:
    """quickstart.sh in its own session, returned once it has started `serve`."""
    script = subprocess.Popen(["bash", "scripts/quickstart.sh", "Hello.", *serve_args(model_repository, ports)],
                              cwd=copy, env={**os.environ, "XDG_CACHE_HOME": str(cache)}, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, text=True, start_new_session=True,
                              preexec_fn=like_a_terminal)
    assert script.stdout is not None
    while "==> starting the server" not in (line := script.stdout.readline()):
        assert line, "quickstart.sh ended before starting the server"
    time.sleep(0.5)
    return script


def test_ctrl_c_while_the_server_starts_leaves_nothing_behind(model_repository: Path, tmp_path: Path) -> None:
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the script, and `serve`,
    which a script's `&` starts with SIGINT ignored."""
    copy, ports = clean_copy(tmp_path / "clone"), pick_ports()
    script = start_quickstart(copy, model_repository, ports, tmp_path / "cache")
    os.killpg(script.pid, signal.SIGINT)
    assert script.wait(timeout=60) == 130
    assert not (copy / "hello.wav").exists()
    assert_nothing_left(copy, ports)


def test_killing_the_script_stops_the_server(model_repository: Path, tmp_path: Path) -> None:
    """SIGKILL of the script (no trap runs): `serve --exit-with-parent` gets SIGTERM from the kernel and stops
    tritonserver."""
    copy, ports = clean_copy(tmp_path / "clone"), pick_ports()
    script = start_quickstart(copy, model_repository, ports, tmp_path / "cache")
    script.kill()
    script.wait()
    deadline = time.monotonic() + 60
    while our_processes(copy, ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert_nothing_left(copy, ports)
