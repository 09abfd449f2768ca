"""Which ``tritonserver`` an embedded server runs: the one in the nvidia-pytriton wheel (the default), or an
unpacked Triton bundle on a host without the wheel (a GPU host set up by ``scripts/gpu/gpu-env.sh``, which
exports its folder as ``$TRITON_HOME``).

A bundle is a folder holding ``bin/tritonserver``, ``backends/python/`` (``libtriton_python.so`` and
``triton_python_backend_utils.py``), ``stub/triton_python_backend_stub`` (built for the running Python),
``libs/`` (the server's shared libraries) and ``caches/``. Its server gets ``LD_LIBRARY_PATH`` = the bundle's
libraries plus the caller's, without the interpreter's LIBDIR: on such hosts that is a system folder whose
cuDNN would shadow PyTorch's own (gpu-env.sh links libpython alone into a private folder on the caller's path).

    with embedded_server(repository, triton_home(), mps=True) as server:   # free loopback ports
        ...server.grpc_url...
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tts_triton.processes.triton_install import TritonInstall, TritonNotFoundError
from tts_triton.processes.triton_server import TritonServer, free_ports

__all__ = ["BUNDLE_VERSION", "TRITON_HOME_ENV", "EmbeddedServer", "bundle_install", "embedded_server",
           "home_install", "triton_home"]

#: The environment variable naming an unpacked Triton bundle to run instead of the wheel's server.
TRITON_HOME_ENV = "TRITON_HOME"
#: ``TritonInstall.version`` of a bundle (its server reports its own version).
BUNDLE_VERSION = "bundle"


def triton_home(explicit: Path | None = None) -> Path | None:
    """The bundle to run: ``explicit``, else ``$TRITON_HOME`` when set, else None (the wheel's server)."""
    if explicit is not None:
        return explicit
    value = os.environ.get(TRITON_HOME_ENV)
    return Path(value) if value else None


def bundle_install(home: Path) -> TritonInstall:
    """The :class:`~tts_triton.processes.triton_install.TritonInstall` of a Triton bundle unpacked at ``home``; raises
    ``TritonNotFoundError`` naming what is missing."""
    install = TritonInstall(version=BUNDLE_VERSION, server=home / "bin" / "tritonserver",
                            python_backend=home / "backends" / "python",
                            stub=home / "stub" / "triton_python_backend_stub", libs=home / "libs",
                            caches=home / "caches")
    if missing := install.missing():
        raise TritonNotFoundError(f"the Triton bundle at {home} is incomplete, missing: "
                                  + ", ".join(str(path) for path in missing))
    return install


def home_install(home: Path | None) -> TritonInstall | None:
    """:func:`bundle_install` of ``home``, or None without one (the server then runs from the wheel)."""
    return bundle_install(home) if home else None


class EmbeddedServer(TritonServer):
    """A :class:`~tts_triton.processes.triton_server.TritonServer` whose environment also holds ``environment`` (e.g.
    settings the models read), and which runs a bundle's server with the bundle's library path (see the module
    docstring)."""

    def __init__(self, model_repository: Path, *, environment: Mapping[str, str] | None = None,
                 **options: Any) -> None:
        super().__init__(model_repository, **options)
        self.extra_environment = dict(environment or {})

    def environment(self) -> dict[str, str]:
        """:meth:`TritonServer.environment`, with the bundle's library path and ``extra_environment``."""
        env = super().environment()
        if self.install.version == BUNDLE_VERSION:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(self.install.libs),
                                                                   os.environ.get("LD_LIBRARY_PATH")]))
        return env | self.extra_environment


def embedded_server(repository: Path, home: Path | None = None, **options: Any) -> EmbeddedServer:
    """A server (not started) for ``repository`` on three free loopback ports, from the bundle at ``home`` or the
    wheel (None); ``options`` go to :class:`EmbeddedServer`."""
    http, grpc, metrics = free_ports(3)
    install = home_install(home)
    return EmbeddedServer(repository.resolve(), http_port=http, grpc_port=grpc, metrics_port=metrics,
                          install=install, **options)
