"""Run the Triton 2.51 ``tritonserver`` shipped in the ``nvidia-pytriton`` wheel as a child process.

The wheel carries the server binary, the Python backend and one backend stub per Python version, but
not in the layout ``tritonserver`` expects. ``find_triton`` locates those files, ``prepare_backends``
assembles (and caches) a ``--backend-directory`` holding ``python/`` for the running interpreter, and
``TritonServer`` starts the server with the running environment's ``bin`` first on ``PATH`` so that
Python models import this environment's packages (numpy < 2, onnxruntime, ...).

Typical use::

    with TritonServer(Path("model_repository"), http_port=free_port()) as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = [
    "TritonInstall",
    "TritonNotFoundError",
    "TritonServer",
    "TritonServerError",
    "find_triton",
    "free_port",
    "prepare_backends",
]

PYTRITON_REQUIREMENT = "nvidia-pytriton==0.7.0"
_PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
_STUB = "triton_python_backend_stub"
_BACKEND_FILES = ("libtriton_python.so", "triton_python_backend_utils.py")
_ERROR_LINE = re.compile(r"E\d{4} |error: |\[libprotobuf ERROR")


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
        stub=root / "python_backend_stubs" / _PYTHON_VERSION / _STUB,
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


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tts-triton"


def _backend_sources(install: TritonInstall) -> dict[str, Path]:
    sources = {name: install.python_backend / name for name in _BACKEND_FILES}
    sources[_STUB] = install.stub
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
    target = directory or _cache_dir() / f"backends-{install.version}-py{_PYTHON_VERSION}"
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


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free when asked (another process may take it before you bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _client_host(host: str) -> str:
    """The address a local client uses to reach a server bound to ``host``, formatted for a URL."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class TritonServer:
    """A ``tritonserver`` child process serving one model repository.

    Contract:
    - ``start`` returns only once ``/v2/health/ready`` answers 200, which (strict readiness, model
      control mode ``none``, exit on error) means every model in the repository loaded. Otherwise it
      stops the process and raises ``TritonServerError`` with the tail of the server log.
    - The server runs in its own process group (a terminal's Ctrl-C reaches this process, not the
      server), and ``stop`` ends the whole group, Python backend stubs included.
    - All server output (stdout, stderr, Triton's log) is appended to ``log_file``, by default
      ``$XDG_CACHE_HOME/tts-triton/logs/tritonserver-<http_port>.log``; ``log_tail`` and ``log_errors``
      read only what the latest ``start`` appended.
    - Endpoints bind ``host`` (loopback by default). ``extra_args`` are appended to the command line
      and so override the defaults (e.g. ``--model-control-mode=explicit``).
    """

    def __init__(
        self,
        model_repository: Path,
        *,
        host: str = "127.0.0.1",
        http_port: int = 8000,
        grpc_port: int = 8001,
        metrics_port: int = 8002,
        log_verbose: int = 0,
        log_file: Path | None = None,
        extra_args: Sequence[str] = (),
        install: TritonInstall | None = None,
    ) -> None:
        self.model_repository = Path(model_repository).absolute()
        self.host = host
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.metrics_port = metrics_port
        self.log_verbose = log_verbose
        self.extra_args = tuple(extra_args)
        self.install = install or find_triton()
        self.log_file = Path(log_file) if log_file else _cache_dir() / "logs" / f"tritonserver-{http_port}.log"
        self._log_start = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._group_alive = False

    @property
    def http_url(self) -> str:
        """HTTP endpoint as ``host:port`` (the form tritonclient.http expects)."""
        return f"{_client_host(self.host)}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """gRPC endpoint as ``host:port`` (the form tritonclient.grpc expects)."""
        return f"{_client_host(self.host)}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """Full URL of the Prometheus metrics page."""
        return f"http://{_client_host(self.host)}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        """Process id of the server, which is also its process group id; ``None`` before ``start``."""
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        """Whether the server process has been started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def command(self, backend_directory: Path) -> list[str]:
        """The ``tritonserver`` command line for a given backend directory."""
        return [
            str(self.install.server),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backend_directory}",
            f"--cache-directory={self.install.caches}",
            f"--http-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.metrics_port}",
            "--model-control-mode=none",
            "--exit-on-error=true",
            "--strict-readiness=true",
            "--disable-auto-complete-config",
            f"--log-verbose={self.log_verbose}",
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        """Environment of the server: this interpreter's ``bin`` first on ``PATH`` (the stub finds its
        ``sys.prefix`` through ``PATH``), the wheel's libraries and libpython on ``LD_LIBRARY_PATH``."""
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
        libdir = sysconfig.get_config_var("LIBDIR")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            filter(None, [str(self.install.libs), libdir, env.get("LD_LIBRARY_PATH")])
        )
        return env

    def start(self, timeout: float = 120) -> None:
        """Start the server and wait until it is ready; raise ``TritonServerError`` (with the log tail) if
        it exits or is not ready within ``timeout`` seconds."""
        if self.is_running():
            raise TritonServerError(f"tritonserver is already running (pid {self.pid})")
        if not self.model_repository.is_dir():
            raise TritonServerError(f"model repository {self.model_repository} is not a directory")
        backends = prepare_backends(self.install)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self._log_start = log.tell()
            proc = self._proc = subprocess.Popen(
                self.command(backends),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
            )
        self._group_alive = True
        try:
            self._wait_ready(proc, timeout)
        except TritonServerError as err:
            errors = "\n".join(self.log_errors()) or "(none)"
            report = f"{err}.\nErrors in the server log {self.log_file}:\n{errors}\nLast lines:\n{self.log_tail(15)}"
            self.stop()
            raise TritonServerError(report) from None
        except BaseException:  # e.g. KeyboardInterrupt while waiting: leave nothing running
            self.stop()
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        url = f"http://{self.http_url}/v2/health/ready"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
        deadline = time.monotonic() + timeout
        while True:
            code = proc.poll()
            if code is not None:
                raise TritonServerError(f"tritonserver exited with code {code}")
            try:
                with opener.open(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet, or 400 while models load
            if time.monotonic() > deadline:
                raise TritonServerError(f"tritonserver not ready after {timeout:.0f} s")
            time.sleep(0.1)

    def stop(self, timeout: float = 30) -> int | None:
        """Stop the server and every process of its group; return its exit code (``None`` if never started).

        Sends SIGINT (graceful: models are unloaded), then SIGTERM after ``timeout`` seconds, then
        SIGKILL; finally kills whatever is left in the process group. Idempotent, and safe to call from a
        signal handler that interrupts ``wait``.
        """
        proc = self._proc
        if proc is None:
            return None
        for sig, wait_s in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(wait_s)
        if self._group_alive:  # once only: later, the group id may belong to another process
            self._group_alive = False
            with contextlib.suppress(ProcessLookupError):  # stubs left behind by a server that died
                os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def wait(self) -> int:
        """Block until the server exits and return its exit code.

        Polls rather than blocking in ``Popen.wait``, whose lock would deadlock a signal handler that
        calls ``stop``.
        """
        if self._proc is None:
            raise TritonServerError("tritonserver was not started")
        while (code := self._proc.poll()) is None:
            time.sleep(0.2)
        return code

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines the latest run wrote to the log ('' when there is no log)."""
        return "\n".join(self._read_log(max(1 << 16, 400 * lines)).splitlines()[-lines:])

    def log_errors(self) -> list[str]:
        """Error lines the latest run wrote to the log: Triton's ``E...`` records, its final ``error:``
        line, protobuf (config.pbtxt) parse errors."""
        return [line for line in self._read_log().splitlines() if _ERROR_LINE.match(line)]

    def _read_log(self, budget: int | None = None) -> str:
        """This run's part of the log, or at most its last ``budget`` bytes."""
        if not self.log_file.exists():
            return ""
        with open(self.log_file, "rb") as log:
            end = log.seek(0, os.SEEK_END)
            log.seek(self._log_start if budget is None else max(self._log_start, end - budget))
            return log.read().decode(errors="replace")

    def __enter__(self) -> TritonServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
