"""The Triton 2.51 server files that the ``nvidia-pytriton`` wheel ships, and the backend directory they need.

The wheel carries the server binary, the Python backend and one backend stub per Python version, but not in the
layout ``tritonserver`` expects: :func:`find_triton` locates those files and :func:`prepare_backends` assembles
(and caches) a ``--backend-directory`` holding ``python/`` for the running interpreter.
:mod:`tts_triton.processes.triton_server` runs the server from them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tts_triton.core.paths import cache_dir

__all__ = ["PYTRITON_REQUIREMENT", "STUB", "TritonInstall", "TritonNotFoundError", "TritonServerError", "find_triton",
           "prepare_backends"]

PYTRITON_REQUIREMENT = "nvidia-pytriton==0.7.0"
_PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
#: The Python backend stub's executable name (one per Python version in the wheel).
STUB = "triton_python_backend_stub"
_BACKEND_FILES = ("libtriton_python.so", "triton_python_backend_utils.py")


class TritonServerError(RuntimeError):
    """The server could not be started or stopped; the message carries the tail of its log."""


class TritonNotFoundError(TritonServerError):
    """The Triton server files (from the nvidia-pytriton wheel) are not installed."""


@dataclass(frozen=True)
class TritonInstall:
    """Where the Triton server files of one installation are.

    ``stub`` is the Python backend stub built for the running interpreter's ``major.minor``.
    """

    version: str
    server: Path
    python_backend: Path
    stub: Path
    libs: Path
    caches: Path

    def missing(self) -> list[Path]:
        """Required files or directories that do not exist (empty when the install is complete)."""
        required = [self.server, self.stub, self.libs, self.caches]
        required += [self.python_backend / name for name in _BACKEND_FILES]
        return [path for path in required if not path.exists()]


def find_triton() -> TritonInstall:
    """Locate the Triton server inside the installed nvidia-pytriton wheel.

    Raises ``TritonNotFoundError`` naming the pip requirement to install when the wheel is absent,
    and naming the missing files when it is incomplete or has no stub for this Python.
    """
    spec = importlib.util.find_spec("pytriton")  # does not import pytriton (slow, pulls its own deps)
    if spec is None or not spec.submodule_search_locations:
        raise TritonNotFoundError(
            f"the Triton server is not installed in {sys.prefix}: run `pip install {PYTRITON_REQUIREMENT}`"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    root = package / "tritonserver"
    install = TritonInstall(
        version=importlib.metadata.version("nvidia-pytriton"),
        server=root / "bin" / "tritonserver",
        python_backend=root / "backends" / "python",
        stub=root / "python_backend_stubs" / _PYTHON_VERSION / STUB,
        libs=package.parent / "nvidia_pytriton.libs",
        caches=root / "caches",
    )
    missing = install.missing()
    if missing:
        listed = ", ".join(str(path) for path in missing)
        raise TritonNotFoundError(
            f"nvidia-pytriton {install.version} (for Python {_PYTHON_VERSION}) is incomplete, missing: {listed}; "
            f"run `pip install --force-reinstall {PYTRITON_REQUIREMENT}`"
        )
    return install


def _backend_sources(install: TritonInstall) -> dict[str, Path]:
    sources = {name: install.python_backend / name for name in _BACKEND_FILES}
    sources[STUB] = install.stub
    return sources


def _is_complete(python_dir: Path, sources: dict[str, Path]) -> bool:
    return all(
        (python_dir / name).is_file() and (python_dir / name).stat().st_size == src.stat().st_size
        for name, src in sources.items()
    )


def prepare_backends(install: TritonInstall, directory: Path | None = None) -> Path:
    """Return a ``--backend-directory`` whose ``python/`` holds the Python backend and this Python's stub.

    The directory (default ``$XDG_CACHE_HOME/tts-triton/backends-<version>-py<X.Y>``) is reused when
    complete and rebuilt otherwise. It is assembled in a temporary sibling and renamed into place, so
    concurrent callers never see a half-copied backend.
    """
    target = directory or cache_dir() / f"backends-{install.version}-py{_PYTHON_VERSION}"
    sources = _backend_sources(install)
    if _is_complete(target / "python", sources):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        staging.chmod(0o755)
        (staging / "python").mkdir()
        for name, src in sources.items():
            shutil.copy2(src, staging / "python" / name)
        shutil.rmtree(target, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:  # another process renamed its copy into place first
            if not _is_complete(target / "python", sources):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
