"""The wheel, not the editable install: built from a copy of the sources, installed into a fresh virtual
environment, every module of it importable there (the BLS and each network's model module included) and
the ``tts-triton`` command working."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from (what deploy/docker/Dockerfile copies too).
SOURCES = ("pyproject.toml", "setup.py", "README.md", "tts_triton", "client", "export")
#: Modules that must be in the wheel: the BLS, the ONNX Runtime model of every network, the networks.
REQUIRED = ("tts_triton.triton.bls", "tts_triton.triton.onnx_model", "tts_triton.client.grpc_client",
            "tts_triton.export.repository", "tts_triton.models.text_encoder", "tts_triton.models.style_encoder",
            "tts_triton.models.decoder", "tts_triton.models.hifigan", "tts_triton.models.stages")

IMPORT_ALL = """
import importlib, pkgutil, sys
import tts_triton
print(tts_triton.__file__)
names = sorted(m.name for m in pkgutil.walk_packages(tts_triton.__path__, "tts_triton."))
for name in names:
    importlib.import_module(name)
print(" ".join(names))
"""


def _backend_utils_dir() -> Path:
    """The folder of Triton's own ``triton_python_backend_utils.py`` (shipped in nvidia-pytriton)."""
    found = next(Path(sysconfig.get_paths()["purelib"]).glob("pytriton/tritonserver/backends/python"), None)
    if found is None or not (found / "triton_python_backend_utils.py").exists():
        pytest.skip("nvidia-pytriton (the serve extra) is not installed")
    return found


@pytest.mark.slow
def test_wheel_installs_and_imports_in_a_fresh_venv(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, source / name)
    # No build isolation: the build uses this environment's setuptools (pyproject bounds it) and needs no index.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    [wheel] = (tmp_path / "dist").glob("tts_triton-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # The dependencies (torch, tritonclient...) from this environment, by a plain path line: it does not
    # run this environment's .pth files, so its editable finder for tts_triton stays out.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(_backend_utils_dir())}

    done = subprocess.run([python, "-c", IMPORT_ALL], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    location, modules = done.stdout.strip().splitlines()[-2:]
    assert Path(location).is_relative_to(site), location
    assert set(REQUIRED) <= set(modules.split())

    cli = subprocess.run([env_dir / "bin" / "tts-triton", "--help"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert cli.returncode == 0 and "serve" in cli.stdout, cli.stderr[-2000:]
