"""The ``tts-triton`` command as a user runs it (a subprocess of this venv's entry point) against a real server."""

from __future__ import annotations

import argparse
import csv
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf
from conftest import like_a_terminal

from tts_triton import cli
from tts_triton.export.targets import AUTO, RUNTIME_TARGETS, embedded_targets
from tts_triton.processes.triton_server import TritonServer, free_port

TTS_TRITON = str(Path(sys.executable).with_name("tts-triton"))


def tts_triton(*args: str, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TTS_TRITON, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]


def one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    """The single ``error: ...`` line a failed command printed (asserting there is nothing else)."""
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    return lines[0]


def test_help_is_plain_and_describes_every_option() -> None:
    top = tts_triton("--help")
    assert top.returncode == 0 and "``" not in top.stdout and ":class:" not in top.stdout
    commands = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, command in commands.items():
        assert name in top.stdout
        if name == "bench":  # parses its own options (tts_triton.bench)
            continue
        assert command.description, name
        undocumented = [a.dest for a in command._actions if not a.help]
        assert not undocumented, f"{name}: options without a description: {undocumented}"
    assert "{" + ",".join([AUTO, *RUNTIME_TARGETS]) + "}" in tts_triton("build-repo", "--help").stdout
    assert "{" + ",".join([AUTO, *embedded_targets()]) + "}" in tts_triton("serve", "--help").stdout


def test_second_serve_on_busy_ports_names_the_port_within_seconds(server: TritonServer, tmp_path: Path) -> None:
    began = time.monotonic()
    run = tts_triton("serve", "--model-repository", str(tmp_path / "never-built"), "--http-port", str(free_port()),
                     "--grpc-port", str(server.grpc_port), "--metrics-port", str(free_port()),
                     env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert time.monotonic() - began < 10  # 0.3 s when measured: ports are checked before torch is imported
    line = one_line_error(run)
    assert line.startswith(f"error: gRPC port {server.grpc_port} on 127.0.0.1 is in use by pid {server.pid} "
                           "(tritonserver ")
    assert "--grpc-port" in line and "ready" not in run.stdout
    assert not (tmp_path / "never-built").exists()  # failed before building anything


def test_say_writes_a_wav(server: TritonServer, tmp_path: Path) -> None:
    run = tts_triton("say", "Hello there.", "-o", str(tmp_path / "a.wav"), "--url", server.grpc_url)
    assert run.returncode == 0, run.stderr
    audio, rate = sf.read(tmp_path / "a.wav")
    assert rate == 22050 and len(audio) > 0


def test_say_over_http_on_the_grpc_port_is_one_line(server: TritonServer, tmp_path: Path) -> None:
    line = one_line_error(tts_triton("say", "Hi.", "-o", str(tmp_path / "a.wav"), "--http", "--url", server.grpc_url,
                                     "--timeout", "10"))
    assert f"{server.grpc_url} does not answer HTTP" in line and "gRPC port" in line
    assert not (tmp_path / "a.wav").exists()


def test_say_without_a_server_hints_to_start_one(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:  # a port nobody listens on once closed
        port = probe.getsockname()[1]
    line = one_line_error(tts_triton("say", "Hi.", "-o", str(tmp_path / "a.wav"), "--url", f"localhost:{port}",
                                     "--timeout", "5"))
    assert f"cannot reach the server at localhost:{port}" in line and "tts-triton serve" in line
    assert "tts-triton serve" in one_line_error(tts_triton("voices", "--url", f"localhost:{port}", "--timeout", "5"))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-o", "missing/dir/a.wav"], "folder"),
        (["--reference", "ref.wav", "--voice", "f1"], "--reference sets the voice and emotion itself"),
        (["--reference", "nope.wav"], "--reference nope.wav: no such file"),
    ],
    ids=["output-folder-missing", "reference-and-voice", "reference-missing"],
)
def test_say_rejects_bad_arguments_before_sending(tmp_path: Path, args: list[str], expected: str) -> None:
    sf.write(tmp_path / "ref.wav", [0.0] * 22050, 22050)
    began = time.monotonic()
    line = one_line_error(tts_triton("say", "Hi.", *args, "--url", f"localhost:{free_port()}", cwd=tmp_path))
    assert expected in line
    assert time.monotonic() - began < 15  # no synthesis was attempted


def test_loadtest_short_run_writes_its_report(server: TritonServer, tmp_path: Path) -> None:
    out = tmp_path / "loadtest"
    run = tts_triton("loadtest", "--users", "2", "--spawn-rate", "2", "--duration", "6s", "--stop-timeout", "60",
                     "--url", f"grpc://{server.grpc_url}", "--out", str(out), "--repeat-ratio", "0.8", timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("report.png", "report.html", "locust_stats.csv", "locust_stats_history.csv"):
        assert (out / name).stat().st_size > 0, name
    with (out / "requests.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(not row["error"] for row in rows)
    assert all(float(row["end"]) > float(row["first_chunk"]) > float(row["start"]) for row in rows)
    texts = [row["text"] for row in rows]  # a repeat speaks the text of another (earlier, completed) request
    assert all(row["repeat"] == "False" or texts.count(row["text"]) > 1 for row in rows)


@pytest.mark.parametrize("response_format", ["pcm", "mp3"])
def test_loadtest_of_the_gateway_reports_a_real_time_factor(gateway: Any, tmp_path: Path,
                                                            response_format: str) -> None:
    """Every row's audio_seconds was 0, so the real-time factor came out nan."""
    out = tmp_path / "loadtest"
    run = tts_triton("loadtest", "--users", "1", "--spawn-rate", "1", "--duration", "4s", "--stop-timeout", "60",
                     "--gateway", gateway.url, "--out", str(out), timeout=180,
                     env={**os.environ, "TTS_GATEWAY_FORMAT": response_format})
    assert run.returncode == 0, run.stdout + run.stderr
    with (out / "requests.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(not row["error"] and float(row["audio_seconds"]) > 0 for row in rows)
    with (out / "latency_percentiles.csv").open(newline="") as f:
        factor = next(row for row in csv.DictReader(f) if row["metric"] == "real_time_factor")
    assert int(factor["count"]) == len(rows) and 0 < float(factor["p50"]) < 1000  # a number, not nan


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["say", "Hi.", "-o", "."], "-o . is a folder: give a file name"),
        (["say", "Hi.", "-o", "a.aac"], "-o a.aac: cannot write .aac; use .wav, .flac, .ogg, .mp3"),
        (["say", "Hi.", "--url", "http://localhost:1"], "--url http://localhost:1: expected a grpc:// URL"),
        (["serve", "--checkpoint", "missing.pt", "--no-build"], "--checkpoint missing.pt: no such file"),
    ],
    ids=["output-is-a-folder", "output-format-unknown", "url-with-http-scheme", "checkpoint-missing"],
)
def test_user_mistakes_get_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    line = one_line_error(tts_triton(*args, "--timeout" if args[0] == "say" else "--startup-timeout", "5",
                                     cwd=tmp_path, timeout=60))
    assert expected in line


def test_serve_refuses_an_impossible_port_at_once() -> None:
    began = time.monotonic()
    run = tts_triton("serve", "--http-port", "99999", "--no-build", timeout=30)
    assert run.returncode == 2 and "99999 is not a TCP port (1-65535)" in run.stderr
    assert time.monotonic() - began < 10


def servers_of(repository: Path, ports: Sequence[str]) -> list[tuple[int, str]]:
    """The processes of ``repository``'s server (serve, tritonserver) listening on ``ports``: a port free_port gave
    may be taken meanwhile by another test worker's server, which is no concern of the test."""
    from tts_triton.processes.triton_server import port_holders

    return [h for port in ports for h in port_holders(int(port)) if str(repository) in h[1]]


def test_serve_whose_parent_died_at_once_exits_and_starts_nothing(model_repository: Path, tmp_path: Path) -> None:
    """The parent passes its pid and exits before `serve` has even imported: serve must not start a server."""
    http, grpc, metrics = (str(free_port()) for _ in range(3))
    script = (f'"{TTS_TRITON}" serve --exit-with-parent $$ --model-repository "{model_repository}" --no-build '
              f"--http-port {http} --grpc-port {grpc} --metrics-port {metrics} >{tmp_path}/serve.log 2>&1 & echo $!")
    serve_pid = int(subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{serve_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{serve_pid}").exists(), "serve outlived its parent"
    assert "has already exited" in (tmp_path / "serve.log").read_text()
    assert not servers_of(model_repository, (http, grpc, metrics))


@pytest.mark.parametrize("after", [0.0, 1.0], ids=["forking", "loading"])
def test_two_stop_signals_at_once_while_serve_starts_leave_nothing(model_repository: Path, tmp_path: Path,
                                                                   after: float) -> None:
    """Ctrl-C in a terminal reaches a script's `serve` twice at once: SIGINT, and SIGTERM from the script's trap
    (quickstart.sh). Whether they land while the server is forked or while it loads its models, serve exits 130
    only once the server's process group is gone."""
    ports = [str(free_port()) for _ in range(3)]
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        serve = subprocess.Popen([TTS_TRITON, "serve", "--no-build", "--model-repository", str(model_repository),
                                  "--http-port", ports[0], "--grpc-port", ports[1], "--metrics-port", ports[2]],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}, start_new_session=True)
    prefix = f"tts_triton_{serve.pid}_{ports[0]}_"  # on the command lines of its tritonserver and stubs
    try:
        deadline = time.monotonic() + 60
        while "starting tritonserver" not in log.read_text():
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.01)
        time.sleep(after)
        serve.send_signal(signal.SIGINT)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 130, log.read_text()
        assert subprocess.run(["pgrep", "-f", prefix], capture_output=True).returncode == 1, "processes left"
        assert not servers_of(model_repository, ports)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        subprocess.run(["pkill", "-KILL", "-f", prefix])  # after a failure: what it left would run on


def test_say_writes_mp3_and_wav_to_stdout(server: TritonServer, tmp_path: Path) -> None:
    run = tts_triton("say", "Hello there.", "-o", str(tmp_path / "a.mp3"), "--url", server.grpc_url)
    assert run.returncode == 0, run.stderr
    assert sf.info(str(tmp_path / "a.mp3")).format == "MP3"
    piped = subprocess.run([TTS_TRITON, "say", "Hello there.", "-o", "-", "--url", server.grpc_url],
                           capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert piped.returncode == 0, piped.stderr
    (tmp_path / "piped.wav").write_bytes(piped.stdout)
    audio, rate = sf.read(tmp_path / "piped.wav")
    assert rate == 22050 and len(audio) > 0 and b"wrote stdout" in piped.stderr


def test_say_to_the_http_port_says_so(server: TritonServer, tmp_path: Path) -> None:
    line = one_line_error(tts_triton("say", "Hi.", "-o", str(tmp_path / "a.wav"), "--url", server.http_url,
                                     "--timeout", "10"))
    assert f"{server.http_url} is Triton's HTTP port" in line and "--http" in line


def test_ctrl_c_in_say_is_one_line(server: TritonServer, tmp_path: Path) -> None:
    say = subprocess.Popen([TTS_TRITON, "say", " ".join(["A long sentence for the decoder to chew on."] * 200),
                            "-o", str(tmp_path / "a.wav"), "--url", server.grpc_url],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=like_a_terminal)
    time.sleep(4)  # in the middle of the imports or the stream: either must end in one line
    say.send_signal(signal.SIGINT)
    _, err = say.communicate(timeout=60)
    assert (say.returncode, err.strip()) == (130, "interrupted")
