"""Run the Triton 2.51 ``tritonserver`` shipped in the ``nvidia-pytriton`` wheel as a child process.

``TritonServer`` starts the server from the files :mod:`tts_triton.processes.triton_install` finds, with the running
environment's ``bin`` first on ``PATH`` so that Python models import this environment's packages (numpy < 2,
onnxruntime, ...).

The server is owned by the ``TritonServer`` object: it runs in its own process group, it is stopped
with SIGTERM and then SIGKILL, and it receives SIGTERM from the kernel when the thread that started it
dies (``PR_SET_PDEATHSIG``), so no exit path of the parent, ``kill -9`` included, leaves it running.
Its ports are checked before it starts (``PortInUseError`` names the holder), and readiness is only
believed once the child itself listens on its HTTP and gRPC ports.

Typical use::

    with TritonServer(Path("model_repository"), http_port=free_port()) as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import secrets
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tts_triton.core.endpoints import GRPC_PORT, HTTP_PORT, METRICS_PORT
from tts_triton.core.paths import cache_dir
from tts_triton.processes import memory
from tts_triton.processes.mps import MpsDaemon, MpsError
from tts_triton.processes.ports import bindable, free_port, free_ports, listening_inodes, port_holders, socket_inodes
from tts_triton.processes.triton_install import TritonInstall, TritonServerError, find_triton, prepare_backends

__all__ = ["PortInUseError", "TritonServer", "check_ports", "free_port", "free_ports", "port_holders",
           "set_parent_death_signal"]

_ERROR_LINE = re.compile(r"E\d{4} |error: |\[libprotobuf ERROR")
#: Where the Python backend's shared-memory regions live.
SHM_DIR = Path("/dev/shm")
#: The device node an NVIDIA driver creates: without it the host has no GPU for Triton.
NVIDIA_CONTROL_DEVICE = Path("/dev/nvidiactl")
#: Options for a host without a GPU: no pinned or CUDA memory pool and no GPU metrics (the CPU target uses none), so
#: that Triton does not try to set them up and log the failures (CUDA driver, NVML, DCGM).
CPU_HOST_ARGS = ("--pinned-memory-pool-byte-size=0", "--cuda-memory-pool-byte-size=0:0", "--allow-gpu-metrics=false")
#: Control APIs refused without the admin header (Triton's restricted-API options, HTTP and gRPC alike).
RESTRICTED_APIS = ("shared-memory", "logging", "trace", "model-repository")
#: Header (gRPC metadata key) that unlocks ``RESTRICTED_APIS``; its value is ``TritonServer.admin_key``.
ADMIN_HEADER = "tts-triton-admin-key"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: Default-named logs (one per owning process) untouched this long are removed when a server starts.
LOG_RETENTION_S = 14 * 24 * 3600


#: numpy's OpenBLAS pool in every stub: one thread. Each BLS instance's small matrix products (the pitch
#: control's) otherwise wake a pool of spinning threads per process, which with 8 BLS instances on a GPU host
#: cost most of the throughput (docs/records/bench/history.md).
STUB_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")


#: Seconds a server that never became ready gets to exit on SIGTERM before SIGKILL: it has no requests to finish,
#: and a Triton still loading models finishes loading them before it honours SIGTERM.
UNREADY_STOP_S = 3.0
#: Seconds ``stop`` waits for the killed members of a server's process group (its stubs) to be gone: a stub
#: unmapping gigabytes of shared memory on a loaded host takes a moment after SIGKILL.
GROUP_EXIT_WAIT_S = 10.0


def _wait_group_gone(pgid: int, seconds: float) -> None:
    """Return once no process of group ``pgid`` is alive but zombies (whose reaping is init's), or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        members = [stat for stat in Path("/proc").glob("[0-9]*/stat") if _group_member(stat, pgid)]
        if not members:
            return
        time.sleep(0.05)


def _group_member(stat: Path, pgid: int) -> bool:
    """Whether the process of ``/proc/<pid>/stat`` is a live (not zombie) member of group ``pgid``."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and int(fields[2]) == pgid


class PortInUseError(TritonServerError):
    """A port the server needs is taken; the one-line message names the port and, when visible, its holder."""

    def __init__(self, message: str, *, port: int) -> None:
        super().__init__(message)
        self.port = port


def check_ports(host: str, ports: dict[str, int]) -> None:
    """Raise ``PortInUseError`` for the first of ``ports`` (label -> port) that cannot be bound on ``host``.

    The message is one line naming the port and what holds it, e.g. ``gRPC port 8001 on 127.0.0.1 is in
    use by pid 4242 (tritonserver --model-repository=...)``. Two labels sharing a port are an error too.
    """
    seen: dict[int, str] = {}
    for label, port in ports.items():
        if port in seen:
            raise PortInUseError(f"{label} port {port} is also given as the {seen[port]} port", port=port)
        seen[port] = label
        if bindable(host, port):
            continue
        holders = port_holders(port)
        who = (", ".join(f"pid {pid} ({command})" for pid, command in holders) if holders
               else "a process this user cannot inspect (another user's, or in another network namespace)")
        raise PortInUseError(f"{label} port {port} on {host or '0.0.0.0'} is in use by {who}", port=port)


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded at import: a preexec_fn should only make system calls


def set_parent_death_signal(sig: int, parent: int, file_size_mb: int = 0) -> None:
    """Have the kernel send this process ``sig`` when the thread that forked it dies (``PR_SET_PDEATHSIG``,
    kept across exec); exit at once if ``parent`` is already gone (this process was re-parented). With
    ``file_size_mb``, also cap the files it grows (:func:`tts_triton.processes.memory.limit_file_size`)."""
    memory.limit_file_size(file_size_mb)
    _LIBC.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


#: Signals a handler may turn into an exception (``serve``'s do): held while the server is forked, since one
#: raised inside ``Popen`` would lose the child, which then runs on with nobody to stop it.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Record :data:`_STOP_SIGNALS` while the body runs and deliver them, in order, once it is done (a handler
    that raises then raises here). Python runs its handlers in the main thread at any bytecode, whichever thread
    the kernel delivered to (a BLAS worker's, say), so a signal mask cannot hold them; replacing the handlers
    does. Off the main thread no handler can interrupt the body: it runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for sig in _STOP_SIGNALS:
            # signal.signal first runs the handlers of signals already caught: one may raise, with no child yet
            if signal.getsignal(sig) is not None:  # None: a handler installed outside Python, left alone
                previous[sig] = signal.signal(sig, lambda caught, _: held.append(caught))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raised: BaseException | None = None
        for sig in held:
            try:
                signal.raise_signal(sig)  # this thread, and its handler runs before raise_signal returns
            except BaseException as err:  # deliver the rest, then raise the first
                raised = raised or err
        if raised is not None:
            raise raised


def _prune_logs(folder: Path, older_than_s: float = LOG_RETENTION_S) -> None:
    """Remove the default-named server logs in ``folder`` not written for ``older_than_s`` seconds."""
    cutoff = time.time() - older_than_s
    for log in folder.glob("tritonserver-*.log"):
        with contextlib.suppress(OSError):  # removed by another process meanwhile
            if log.stat().st_mtime < cutoff:
                log.unlink()


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
    - ``start`` first checks that the three ports can be bound (else ``PortInUseError``, naming the port
      and its holder, and nothing is started). It returns only once the child process itself listens on
      its HTTP and gRPC ports and ``/v2/health/ready`` answers 200, which (strict readiness, explicit model
      control loading every model, exit on error) means every model in the repository loaded. Otherwise it stops the
      process and raises ``TritonServerError`` with the tail of the server log.
    - The server runs in its own process group (a terminal's Ctrl-C reaches this process, not the
      server). ``stop`` sends it SIGTERM (graceful: models are unloaded), then SIGKILLs the whole group,
      Python backend stubs included, after a grace period. If the thread that called ``start`` dies
      without stopping it (even by SIGKILL), the kernel sends the server SIGTERM: start it from a thread
      that outlives it (normally the main thread).
    - All server output (stdout, stderr, Triton's log) is appended to ``log_file``, by default
      ``$XDG_CACHE_HOME/tts-triton/logs/tritonserver-<http_port>-<pid of this process>.log`` (one file
      per owning process: a second server never writes into the first one's log; such logs untouched for
      ``LOG_RETENTION_S`` are removed); ``log_tail`` and ``log_errors`` read only what the latest ``start``
      appended.
    - Endpoints bind ``host`` (loopback by default). ``extra_args`` are appended to the command line
      and so override the defaults (e.g. ``--exit-timeout-secs=5``).
    - The control APIs of ``RESTRICTED_APIS`` (shared-memory registration, log settings, tracing, model
      loading) answer only requests carrying the header ``ADMIN_HEADER: admin_key`` (default: a random key).
    - The Python backend's shared-memory regions are named ``shm_prefix`` + a UUID; ``stop`` removes
      those left behind (a stub that died leaves its region in ``/dev/shm``).
    - Memory guards (:mod:`tts_triton.processes.memory`): ``allocator`` (``LD_PRELOAD``, glibc's when the library is
      missing: a warning says so), no gRPC request pool, and Python-backend regions capped at
      ``shm_region_limit_mb`` MiB (0: no cap; a request whose inputs do not fit is refused before it is copied);
      both default to what the environment asks for (:func:`tts_triton.processes.memory.configured`).
    - With ``mps``, ``start`` first starts a CUDA MPS control daemon of the server's own
      (:class:`~tts_triton.processes.mps.MpsDaemon`; its absence is a ``TritonServerError``) and ``stop`` ends it.
    - With ``warm_up``, ``start`` returns only once every model answered a warm-up request through gRPC, the way
      users' requests come (:func:`tts_triton.processes.health.warm_up`; a failure is a ``TritonServerError``): Triton's
      own readiness comes before the first calls have been paid for.
    """

    def __init__(
        self,
        model_repository: Path,
        *,
        host: str = "127.0.0.1",
        http_port: int = HTTP_PORT,
        grpc_port: int = GRPC_PORT,
        metrics_port: int = METRICS_PORT,
        log_verbose: int = 0,
        log_file: Path | None = None,
        extra_args: Sequence[str] = (),
        install: TritonInstall | None = None,
        admin_key: str | None = None,
        mps: bool = False,
        allocator: str | None = None,
        shm_region_limit_mb: int | None = None,
        warm_up: bool = False,
    ) -> None:
        self.model_repository = Path(model_repository).absolute()
        self.host = host
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.metrics_port = metrics_port
        self.log_verbose = log_verbose
        self.extra_args = tuple(extra_args)
        self.install = install or find_triton()
        default_log = cache_dir() / "logs" / f"tritonserver-{http_port}-{os.getpid()}.log"
        self.log_file = Path(log_file) if log_file else default_log
        self.admin_key = admin_key or secrets.token_hex(16)
        self.shm_prefix = f"tts_triton_{os.getpid()}_{http_port}_"
        self._prune = log_file is None
        self._log_start = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._group_alive = False
        self._mps = MpsDaemon() if mps else None
        default_allocator, default_limit = memory.configured(os.environ)
        self.allocator = allocator or default_allocator
        self.shm_region_limit_mb = default_limit if shm_region_limit_mb is None else shm_region_limit_mb
        self.warm_up = warm_up

    def use_mps(self) -> None:
        """Run the models under an MPS daemon of the server's own from the next ``start`` (as ``mps=True``)."""
        self._mps = self._mps or MpsDaemon()

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

    @property
    def ports(self) -> dict[str, int]:
        """The server's ports by label (``HTTP``, ``gRPC``, ``metrics``)."""
        return {"HTTP": self.http_port, "gRPC": self.grpc_port, "metrics": self.metrics_port}

    def admin_headers(self, *, grpc: bool = False) -> dict[str, str]:
        """The header that unlocks ``RESTRICTED_APIS`` (Triton prefixes gRPC's with ``triton-grpc-protocol-``)."""
        return {("triton-grpc-protocol-" if grpc else "") + ADMIN_HEADER: self.admin_key}

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
            # explicit: every model loaded at start, and one model can be reloaded or unloaded later
            # (tts_triton.processes.model_control: per-model healing, drain)
            "--model-control-mode=explicit",
            "--load-model=*",
            "--exit-on-error=true",
            "--strict-readiness=true",
            "--disable-auto-complete-config",
            f"--log-verbose={self.log_verbose}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            f"--http-restricted-api={','.join(RESTRICTED_APIS)}:{ADMIN_HEADER}={self.admin_key}",
            f"--grpc-restricted-protocol={','.join(RESTRICTED_APIS)}:{ADMIN_HEADER}={self.admin_key}",
            *memory.SERVER_ARGS,
            *(() if NVIDIA_CONTROL_DEVICE.exists() else CPU_HOST_ARGS),
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        """Environment of the server: this interpreter's ``bin`` first on ``PATH`` (the stub finds its
        ``sys.prefix`` through ``PATH``), the wheel's libraries and libpython on ``LD_LIBRARY_PATH``, and
        :data:`STUB_BLAS_THREADS` (unless the caller's environment sets it), the ``allocator``'s preload."""
        env = dict(os.environ)
        env.setdefault(*STUB_BLAS_THREADS)
        env |= memory.allocator_environment(self.allocator, env)
        env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
        libdir = sysconfig.get_config_var("LIBDIR")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            filter(None, [str(self.install.libs), libdir, env.get("LD_LIBRARY_PATH")])
        )
        return env | (self._mps.env if self._mps else {})

    def start(self, timeout: float = 120) -> None:
        """Start the server and wait until it is ready; raise ``TritonServerError`` (with the log tail) if
        it exits or is not ready within ``timeout`` seconds."""
        if self.is_running():
            raise TritonServerError(f"tritonserver is already running (pid {self.pid})")
        if not self.model_repository.is_dir():
            raise TritonServerError(f"model repository {self.model_repository} is not a directory")
        check_ports(self.host, self.ports)
        backends = prepare_backends(self.install)
        try:  # from here on, a failure leaves nothing running (the MPS daemon included)
            if self._mps:
                self._mps.start()
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            if self._prune:
                _prune_logs(self.log_file.parent)
            memory.rotate_log(self.log_file, self.shm_region_limit_mb)  # the server cannot append past its cap
            with open(self.log_file, "ab") as log:
                self._log_start = log.tell()
                command, env = self.command(backends), self.environment()
                with _stop_signals_held():  # delivered once _proc is set
                    proc = self._proc = subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                        preexec_fn=functools.partial(set_parent_death_signal, signal.SIGTERM, os.getpid(),
                                                     self.shm_region_limit_mb),
                    )
                    # before the stop signals are delivered: a stop they start must kill the whole group, stubs
                    # the server spawns while it handles SIGTERM included
                    self._group_alive = True
        except MpsError as err:
            self.stop()
            raise TritonServerError(str(err)) from None
        except BaseException:
            self.stop()
            raise
        try:
            self._wait_ready(proc, timeout)
            if self.warm_up:
                self._warm_up(timeout)
        except TritonServerError as err:
            errors = "\n".join(self.log_errors()) or "(none)"
            report = f"{err}.\nErrors in the server log {self.log_file}:\n{errors}\nLast lines:\n{self.log_tail(15)}"
            self.stop(timeout=UNREADY_STOP_S)
            raise TritonServerError(report) from None
        except BaseException:  # e.g. KeyboardInterrupt while waiting: leave nothing running
            self.stop(timeout=UNREADY_STOP_S)
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """Return once ``proc`` listens on all its ports and reports ready; another process answering on
        a port (one that took it after ``check_ports``) never counts."""
        url = f"http://{self.http_url}/v2/health/ready"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
        deadline = time.monotonic() + timeout
        while True:
            code = proc.poll()
            if code is not None:
                raise TritonServerError(f"tritonserver exited with code {code}")
            if self.listens(proc.pid):
                # URLError/OSError: a 400 while models load
                with contextlib.suppress(urllib.error.URLError, OSError), opener.open(url, timeout=1) as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise TritonServerError(f"tritonserver not ready after {timeout:.0f} s")
            time.sleep(0.1)

    def _warm_up(self, timeout: float) -> None:
        from tts_triton.processes.health import warm_up  # tritonclient and numpy: only a warm-up needs them

        report = warm_up(self.grpc_url, timeout=timeout)
        if not report.ok:
            raise TritonServerError(f"warm-up failed: {report.summary()}")

    def listens(self, pid: int | None = None) -> bool:
        """Whether process ``pid`` (default: the server) listens on the HTTP and gRPC ports (the readiness
        probe's and the clients'; the metrics endpoint may be turned off with ``--allow-metrics=false``)."""
        pid = self.pid if pid is None else pid
        if pid is None:
            return False
        owned = socket_inodes(pid)
        return all(listening_inodes(port) & owned for port in (self.http_port, self.grpc_port))

    def stop(self, timeout: float = 30) -> int | None:
        """Stop the server and every process of its group; return its exit code (``None`` if never started).

        Sends SIGTERM (graceful: Triton unloads the models, bounded by its ``--exit-timeout-secs``), then,
        after ``timeout`` seconds, SIGKILL; finally kills whatever is left in the process group. Idempotent,
        and safe to call from a signal handler that interrupts ``wait``.
        """
        proc = self._proc
        try:
            return None if proc is None else self._stop(proc, timeout)
        finally:
            if self._mps:
                self._mps.stop()

    def _stop(self, proc: subprocess.Popen[bytes], timeout: float) -> int | None:
        for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(wait_s)
        if self._group_alive:  # once only: later, the group id may belong to another process
            with contextlib.suppress(ProcessLookupError):  # stubs left behind by a server that died
                os.killpg(proc.pid, signal.SIGKILL)
                _wait_group_gone(proc.pid, GROUP_EXIT_WAIT_S)
            self._group_alive = False  # only now: a stop interrupted before this point is redone by the next
        for region in SHM_DIR.glob(f"{self.shm_prefix}*"):  # a process still unmapping it keeps its pages
            region.unlink(missing_ok=True)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL the server process now if it runs (a ``stop`` in progress then goes straight on to the
        rest of its group); safe to call from a signal handler, a no-op before ``start`` and after ``stop``."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGKILL)  # Popen skips a reaped process: its pid may be another's

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
