"""The one target table and the GPU host: `auto` resolved on this host, `build-repo --target torch-cuda` writing the
GPU repository, `serve` choosing (and rebuilding for) the target it is asked for, its Triton bundle, and the gRPC
commands in an environment without the HTTP client (a GPU host's) -- all without starting a server."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tritonclient.grpc import model_config_pb2

from tts_triton.core import contract
from tts_triton.core.layout import CHECKPOINT_FILE
from tts_triton.export import targets
from tts_triton.export.build import ensure_repository
from tts_triton.export.pbtxt import parse
from tts_triton.export.repository import read_manifest
from tts_triton.export.targets import AUTO, CPU_TARGET, GPU_TARGET, KIND_GPU, resolve_target
from tts_triton.processes.serve import serve_target
from tts_triton.processes.triton_server import free_port

TTS_TRITON = str(Path(sys.executable).with_name("tts-triton"))
KIND_NAMES = dict((v, k) for k, v in model_config_pb2.ModelInstanceGroup.Kind.items())
NETWORKS = (contract.TEXT_ENCODER, contract.STYLE_ENCODER, contract.DECODER, contract.VOCODER)


def run_cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TTS_TRITON, *args], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache)})


def test_auto_follows_what_torch_finds_here(monkeypatch: pytest.MonkeyPatch) -> None:
    usable, found = targets.cuda_torch()
    assert usable == (torch.version.cuda is not None and torch.cuda.is_available())
    assert torch.__version__ in found
    assert resolve_target(AUTO).name == (GPU_TARGET if usable else CPU_TARGET)
    monkeypatch.setattr(targets, "cuda_torch", lambda: (True, "torch 9+cu99 sees a GPU"))
    assert resolve_target(AUTO) == targets.TargetChoice(GPU_TARGET, "auto: torch 9+cu99 sees a GPU")
    monkeypatch.setattr(targets, "cuda_torch", lambda: (False, "PyTorch is not installed"))
    assert resolve_target(AUTO).name == CPU_TARGET
    assert resolve_target("tensorrt") == targets.TargetChoice("tensorrt", "asked for")
    with pytest.raises(ValueError, match="unknown runtime target 'cuda'"):
        resolve_target("cuda")


def test_build_repo_torch_cuda_writes_the_gpu_repository(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    run = run_cli("build-repo", "--target", "torch-cuda", "--out", str(out), cache=tmp_path / "cache")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "target: torch-cuda (asked for)" in run.stdout
    assert read_manifest(out)["target"] == "torch-cuda"
    for name in NETWORKS:  # all four networks on the GPU
        config = parse((out / name / "config.pbtxt").read_text())
        assert config.backend == "python" and (out / name / "1" / CHECKPOINT_FILE).is_file(), name
        assert [KIND_NAMES[group.kind] for group in config.instance_group] == [KIND_GPU], name


def serve_args(repository: Path, target: str, *, no_build: bool = False) -> argparse.Namespace:
    return argparse.Namespace(model_repository=repository, target=target, no_build=no_build)


def test_serve_rebuilds_for_another_target(model_repository: Path, checkpoint_file: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    repository = shutil.copytree(model_repository, tmp_path / "repo")
    assert read_manifest(repository)["target"] == CPU_TARGET
    assert serve_target(serve_args(repository, AUTO, no_build=True)) == CPU_TARGET
    assert "target: onnxruntime-python (as built (--no-build))" in capsys.readouterr().out
    with pytest.raises(ValueError, match="is built for onnxruntime-python, not torch-cuda"):
        serve_target(serve_args(repository, GPU_TARGET, no_build=True))
    with pytest.raises(ValueError, match="not a built model repository"):
        serve_target(serve_args(tmp_path / "nothing", AUTO, no_build=True))

    monkeypatch.setattr(targets, "cuda_torch", lambda: (True, "torch 9+cu99 sees a GPU"))
    target = serve_target(serve_args(repository, AUTO))
    assert target == GPU_TARGET and "target: torch-cuda (auto: torch 9+cu99 sees a GPU)" in capsys.readouterr().out
    ensure_repository(repository, checkpoint=checkpoint_file, cache=model_repository.parent / "cache", target=target,
                      progress=False)
    assert read_manifest(repository)["target"] == GPU_TARGET
    kind = parse((repository / contract.DECODER / "config.pbtxt").read_text()).instance_group[0].kind
    assert KIND_NAMES[kind] == KIND_GPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a host without a CUDA GPU")
def test_serve_torch_cuda_without_a_gpu_is_one_line(tmp_path: Path) -> None:
    run = run_cli("serve", "--target", "torch-cuda", "--model-repository", str(tmp_path / "repo"),
                  "--http-port", str(free_port()), "--grpc-port", str(free_port()), "--metrics-port", str(free_port()),
                  cache=tmp_path / "cache")
    assert run.returncode == 1 and run.stderr.startswith("error: target torch-cuda runs PyTorch on CUDA"), run.stderr
    assert f"use --target {AUTO}" in run.stderr and not (tmp_path / "repo").exists()


def test_serve_names_an_incomplete_triton_bundle(tmp_path: Path) -> None:
    run = subprocess.run([TTS_TRITON, "serve", "--model-repository", str(tmp_path / "repo")], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL,
                         env={**os.environ, "TRITON_HOME": str(tmp_path / "bundle"),
                              "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.startswith(f"error: the Triton bundle at {tmp_path / 'bundle'} is incomplete, missing: ")
    assert not (tmp_path / "repo").exists()


def test_grpc_commands_need_no_http_client(tmp_path: Path) -> None:
    """`say` and `voices` over gRPC import nothing of tritonclient's http extra (gevent), which a GPU host lacks."""
    blocker = ("import sys\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('gevent', 'geventhttpclient'):\n"
               "            raise ModuleNotFoundError(name)\n"
               "sys.meta_path.insert(0, Block())\n"
               "from tts_triton.cli import main\n"
               "sys.exit(main(sys.argv[1:]))\n")
    url = f"localhost:{free_port()}"
    for args in (["say", "Hi.", "-o", str(tmp_path / "a.wav"), "--url", url, "--timeout", "5"],
                 ["voices", "--url", url, "--timeout", "5"]):
        run = subprocess.run([sys.executable, "-c", blocker, *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 1 and run.stderr.startswith(f"error: cannot reach the server at {url}"), run.stderr
