"""Self-healing for ``tts-triton serve``: restart the server when a model can no longer run.

Triton 2.51 does not restart a Python backend stub that died (``kill -9``, out-of-memory): every
request to that model fails with ``Stub process '<model>_0_0' is not healthy`` while Triton's own
health endpoints still answer 200. :class:`Supervisor` runs the deep check of :mod:`tts_triton.health`
every ``interval`` seconds and restarts the whole server (stop, then start: every stub is new) after
``failures`` failed checks in a row, or at once when the server process exited.

Recovery bound after a fault: detection within ``interval * failures`` plus up to ``failures`` checks
(each at most ``check_timeout``), then the stop (``stop_timeout`` at most) and a fresh start (model
loading: seconds on the shipped repository). Each restart is recorded in :attr:`Supervisor.restarts`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tts_triton.health import HealthReport, check_health
from tts_triton.server import TritonServer

__all__ = ["Restart", "Supervisor"]


@dataclass(frozen=True)
class Restart:
    """One restart: why, and how long from the decision to the server being ready again."""

    reason: str
    seconds: float


class Supervisor:
    """Keeps a started :class:`~tts_triton.server.TritonServer` serving (see the module docstring)."""

    def __init__(
        self,
        server: TritonServer,
        *,
        interval: float = 5.0,
        failures: int = 2,
        check_timeout: float = 10.0,
        stop_timeout: float = 5.0,
        start_timeout: float = 300.0,
        log: Callable[[str], None] = print,
    ) -> None:
        if interval <= 0 or failures < 1:
            raise ValueError(f"need interval > 0 and failures >= 1, got {interval} and {failures}")
        self.server = server
        self.interval = interval
        self.failures = failures
        self.check_timeout = check_timeout
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.log = log
        self.restarts: list[Restart] = []
        self.last_report: HealthReport | None = None

    def run(self, stop: threading.Event | None = None) -> None:
        """Supervise until ``stop`` is set (forever without one; a signal handler may raise out of it).

        Call it on a thread that outlives the server (normally the main thread): a server is stopped when
        the thread that started it ends, and restarts start it on this thread. Raises
        :class:`~tts_triton.server.TritonServerError` when a restart fails.
        """
        stop = stop or threading.Event()
        failed = 0
        while not stop.wait(self.interval):
            if not self.server.is_running():
                self.restart(f"tritonserver exited (code {self.server.wait()})")
                failed = 0
                continue
            report = self.last_report = check_health(self.server.grpc_url, timeout=self.check_timeout)
            if report.ok or stop.is_set():
                failed = 0
                continue
            failed += 1
            self.log(f"health check failed ({failed}/{self.failures}): {', '.join(report.failed)}")
            if failed >= self.failures:
                details = "; ".join(f"{m.model}: {m.error}" for m in report.models if not m.ok)
                self.restart(f"models cannot run: {details}")
                failed = 0

    def restart(self, reason: str) -> Restart:
        """Stop the server (at most ``stop_timeout`` s of grace), start it again, and record how long it took."""
        self.log(f"restarting tritonserver: {reason}")
        start = time.monotonic()
        self.server.stop(timeout=self.stop_timeout)
        self.server.start(timeout=self.start_timeout)
        restart = Restart(reason, time.monotonic() - start)
        self.restarts.append(restart)
        self.log(f"tritonserver serving again after {restart.seconds:.1f} s")
        return restart
