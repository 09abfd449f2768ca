"""The server's memory guards (tts_triton.processes.memory): allocator preload, file-size cap, launcher; no server
started.

The real-server check (rejected 30-minute references leave no memory behind) is in test_cancel_stress.py.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException
from waiting import wait_until

from tts_triton.client.errors import TTSError, classify_error, final_follows, refusal_error, refused
from tts_triton.core.contract import REFERENCE_AUDIO
from tts_triton.errors import INVALID_INPUT, mark
from tts_triton.processes import memory, triton_server
from tts_triton.processes.triton_server import TritonServer

JEMALLOC = memory.find_library(memory.ALLOCATORS["jemalloc"][0])
needs_jemalloc = pytest.mark.skipif(JEMALLOC is None, reason="libjemalloc2 is not installed (scripts/setup.sh)")
#: What Triton 2.51's Python backend answers when a request's inputs do not fit the capped region.
TOO_LARGE = ("Failed to increase the shared memory pool size for key 'tts_triton_1_2_x' to 1048576 bytes. If you are "
             "running Triton inside docker, use '--shm-size' flag to control the shared memory region size. "
             "Error: File too large")


def test_glibc_needs_no_preload() -> None:
    assert memory.allocator_environment(memory.GLIBC, {}) == {}


def test_the_environment_picks_the_allocator_and_the_cap() -> None:
    assert memory.configured({}) == (memory.DEFAULT_ALLOCATOR, memory.SHM_REGION_LIMIT_MB)
    assert memory.configured({memory.ALLOCATOR_ENV: "tcmalloc", memory.SHM_LIMIT_ENV: "0"}) == ("tcmalloc", 0)
    with pytest.raises(ValueError, match=memory.SHM_LIMIT_ENV):
        memory.configured({memory.SHM_LIMIT_ENV: "64M"})


def test_unknown_allocator_is_refused() -> None:
    with pytest.raises(ValueError, match="must be one of"):
        memory.allocator_environment("hoard", {})


@needs_jemalloc
def test_jemalloc_goes_first_and_the_callers_settings_win() -> None:
    env = memory.allocator_environment("jemalloc", {"LD_PRELOAD": "/opt/other.so"})
    assert env["LD_PRELOAD"] == f"{JEMALLOC} /opt/other.so"
    assert "dirty_decay_ms" in env["MALLOC_CONF"]
    assert "MALLOC_CONF" not in memory.allocator_environment("jemalloc", {"MALLOC_CONF": "narenas:1"})


@needs_jemalloc
def test_the_allocator_a_process_runs_with_is_read_from_its_memory_map() -> None:
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    preloaded = subprocess.Popen(sleep, env=env | memory.allocator_environment("jemalloc", env))
    plain = subprocess.Popen(sleep, env=env)
    try:
        # the loader maps the preload right after exec
        wait_until(lambda: memory.allocator_of(preloaded.pid) == "jemalloc", 10, "the preload mapped")
        assert memory.allocator_of(plain.pid) == memory.GLIBC
    finally:
        for process in (preloaded, plain):
            process.kill()
            process.wait()
    assert memory.allocator_of(preloaded.pid) is None  # gone


def test_an_allocator_unpacked_outside_the_system_folders_is_found_on_ld_library_path(tmp_path: Path) -> None:
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")  # found by name: the GPU host's unpacked libjemalloc2
    env = memory.allocator_environment("jemalloc", {"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"})
    assert env["LD_PRELOAD"] == str(tmp_path / "libjemalloc.so.2")


def test_a_missing_allocator_falls_back_to_glibc_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(memory, "find_library", lambda name, library_path="": None)
    with caplog.at_level(logging.WARNING, logger="tts_triton.processes.memory"):
        assert memory.allocator_environment("jemalloc", {}) == {}
    assert "libjemalloc2" in caplog.text and "glibc" in caplog.text


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_capped_files_fail_to_grow_without_killing_the_process_and_a_child_may_lift_the_cap(tmp_path: Path) -> None:
    code = f"""
import os, signal, sys
from tts_triton.processes import memory
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # as subprocess leaves it in a server it starts
memory.limit_file_size(1)
with open({str(tmp_path / "f")!r}, "wb") as f:
    try:
        os.ftruncate(f.fileno(), 2 << 20)  # how the Python backend grows a region
    except OSError as err:
        print("refused", err.errno)
    memory.lift_file_size_limit()
    os.ftruncate(f.fileno(), 2 << 20)
    print("lifted", os.fstat(f.fileno()).st_size)
"""
    out = _child(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["refused", str(errno.EFBIG), "lifted", str(2 << 20)]


def test_rotate_log_keeps_the_log_under_half_the_cap(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * (600 << 10))
    memory.rotate_log(log, 2)
    assert log.exists()
    memory.rotate_log(log, 1)
    assert not log.exists() and (tmp_path / "server.log.1").stat().st_size == 600 << 10
    memory.rotate_log(log, 1)  # nothing to rotate
    memory.rotate_log(tmp_path / "server.log.1", 0)  # no cap
    assert (tmp_path / "server.log.1").exists()


def test_the_launcher_execs_the_server_with_the_guards(tmp_path: Path) -> None:
    server = tmp_path / "server"  # stands in for tritonserver: prints its first argument and its file-size cap
    server.write_text(f"#!/bin/sh\necho \"$1\"\n{sys.executable} -c 'import resource; "
                      "print(resource.getrlimit(resource.RLIMIT_FSIZE)[0])'\n")
    server.chmod(0o755)
    env = {**os.environ, memory.SHM_LIMIT_ENV: "2", memory.ALLOCATOR_ENV: memory.GLIBC}
    out = subprocess.run([sys.executable, "-m", "tts_triton.processes.memory", str(server), "--mine"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [memory.SERVER_ARGS[0], str(2 << 20)]  # the guards' options before the caller's
    bad = subprocess.run([sys.executable, "-m", "tts_triton.processes.memory", "true"], capture_output=True, text=True,
                         env={**env, memory.ALLOCATOR_ENV: "hoard"}, timeout=60)
    assert bad.returncode != 0 and "TTS_TRITON_ALLOCATOR" in bad.stderr and "Traceback" not in bad.stderr


def test_the_server_command_and_environment_carry_the_guards(tmp_path: Path) -> None:
    override = "--grpc-infer-allocation-pool-size=4"
    command = TritonServer(tmp_path, allocator=memory.GLIBC, extra_args=[override]).command(tmp_path)
    assert command.index(memory.SERVER_ARGS[0]) < command.index(override)  # the caller's options win
    assert TritonServer(tmp_path, allocator=memory.GLIBC).environment().get("LD_PRELOAD") == os.environ.get(
        "LD_PRELOAD")
    if JEMALLOC is not None:
        assert str(JEMALLOC) in TritonServer(tmp_path).environment()["LD_PRELOAD"]


def test_only_a_host_without_a_gpu_turns_the_gpu_pools_and_metrics_off(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_server, "NVIDIA_CONTROL_DEVICE", tmp_path / "nvidiactl")
    without = TritonServer(tmp_path).command(tmp_path)
    (tmp_path / "nvidiactl").touch()
    with_gpu = TritonServer(tmp_path).command(tmp_path)
    assert set(triton_server.CPU_HOST_ARGS) <= set(without) and not set(triton_server.CPU_HOST_ARGS) & set(with_gpu)


def test_the_parent_death_hook_applies_the_cap() -> None:
    out = _child("import os, resource\nfrom tts_triton.processes.triton_server import set_parent_death_signal\n"
                 "set_parent_death_signal(15, os.getppid(), 3)\nprint(resource.getrlimit(resource.RLIMIT_FSIZE)[0])")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(3 << 20)


def test_the_backends_refusal_ends_the_stream_and_is_no_bad_input_of_the_clients() -> None:
    """No status, no mark: refused before the model ran it. With the model ready that is a plain TTSError, not
    bad input (inputs too large for the region are far beyond the server's own limits, which it names)."""
    assert refused(InferenceServerException(TOO_LARGE)) and not final_follows(TOO_LARGE)
    assert classify_error(TOO_LARGE) is TTSError
    assert type(refusal_error(InferenceServerException(TOO_LARGE), model_ready=True)) is TTSError
    assert final_follows(mark(INVALID_INPUT, "REFERENCE_AUDIO: is 1800.00 s long; it must be 0.5-30 s",
                              REFERENCE_AUDIO))
    assert classify_error("something else") is TTSError
