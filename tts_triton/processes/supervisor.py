"""Self-healing for ``tts-triton serve``: reload a dead model, restart the server only when that fails.

Triton 2.51 does not restart a Python backend stub that died (``kill -9``, out-of-memory): every request
to that model fails (``Stub process '<model>_0_0' is not healthy``; a dead BLS stub never answers) while
Triton's own health endpoints still answer 200. :class:`Supervisor` runs the deep check of
:mod:`tts_triton.processes.health` every ``interval`` seconds and acts on *dead* models only: a model that is merely
slow (a loaded server: no answer within ``check_timeout``, or refused by admission control) is logged
and left alone. After ``failures`` checks in a row that find a model dead it reloads that model alone
(:func:`~tts_triton.processes.model_control.reload_model`: new stubs, swapped in while the other models keep serving
their streams) and checks it again; only when the reload fails or the model is still dead does it restart
the whole server (stop, start: every stub new). A server process that exited is restarted at once.

Recovery bound after a stub dies: detection within ``interval * failures`` plus the checks (each at most
``check_timeout``), then a reload (seconds) or, failing that, stop (``stop_timeout`` at most) and start.
Every action is recorded in :attr:`Supervisor.actions` (``restarts`` lists the server restarts alone).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tts_triton.processes.health import HealthReport, check_health
from tts_triton.processes.model_control import PUBLIC_MODELS, reload_model
from tts_triton.processes.triton_install import TritonServerError
from tts_triton.processes.triton_server import TritonServer

__all__ = ["Action", "Supervisor"]


@dataclass(frozen=True)
class Action:
    """One healing action: ``kind`` (``reload`` of ``model``, or ``restart`` of the server), why, how long."""

    kind: Literal["reload", "restart"]
    reason: str
    seconds: float
    model: str = ""


class Supervisor:
    """Keeps a started :class:`~tts_triton.processes.triton_server.TritonServer` serving (see the module docstring)."""

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
        self.actions: list[Action] = []
        self.last_report: HealthReport | None = None

    @property
    def restarts(self) -> list[Action]:
        """The server restarts among :attr:`actions`."""
        return [a for a in self.actions if a.kind == "restart"]

    def check(self) -> HealthReport:
        """One deep check of the server (its own stubs included)."""
        report = self.last_report = check_health(self.server.grpc_url, timeout=self.check_timeout,
                                                 server_pid=self.server.pid)
        return report

    def run(self, stop: threading.Event | None = None) -> None:
        """Supervise until ``stop`` is set (forever without one; a signal handler may raise out of it).

        Call it on a thread that outlives the server (normally the main thread): a server is stopped when
        the thread that started it ends, and restarts start it on this thread. Raises
        :class:`~tts_triton.processes.triton_install.TritonServerError` when a restart fails.
        """
        stop = stop or threading.Event()
        failed = 0
        while not stop.wait(self.interval):
            if not self.server.is_running():
                self.restart(f"tritonserver exited (code {self.server.wait()})")
                failed = 0
                continue
            report = self.check()
            if stop.is_set():
                break
            if report.slow:
                self.log(f"overloaded, not restarting: {', '.join(report.slow)} slow")
            if report.alive:
                failed = 0
                continue
            failed += 1
            self.log(f"dead model(s) ({failed}/{self.failures}): {', '.join(report.dead)}")
            if failed >= self.failures:
                self.heal(report)
                failed = 0

    def heal(self, report: HealthReport) -> None:
        """Reload the dead models of ``report``, the networks first: the BLS models fail whenever a network they
        call is dead, so they are reloaded only if still dead once the networks are back. Restart the server
        if a reload fails or leaves a model dead."""
        reasons = {m.model: m.error for m in report.models}
        if not self._reload([m for m in report.dead if m not in PUBLIC_MODELS], reasons):
            return
        dead = self.check().dead
        if dead and self._reload(dead, reasons) and (still := self.check().dead):
            self.restart(f"still dead after a reload: {', '.join(still)}")

    def _reload(self, models: list[str], reasons: dict[str, str]) -> bool:
        """Reload ``models`` one by one; False (after restarting the server) when a reload fails."""
        for model in models:
            self.log(f"reloading {model}: {reasons.get(model) or 'dead'}")
            try:
                seconds = reload_model(self.server, model, timeout=self.start_timeout)
            except TritonServerError as err:
                self.restart(f"reloading {model} failed: {err}")
                return False
            self.actions.append(Action("reload", reasons.get(model, ""), seconds, model))
            self.log(f"{model} reloaded in {seconds:.1f} s")
        return True

    def restart(self, reason: str) -> Action:
        """Stop the server (at most ``stop_timeout`` s of grace), start it again, and record how long it took."""
        self.log(f"restarting tritonserver: {reason}")
        start = time.monotonic()
        self.server.stop(timeout=self.stop_timeout)
        self.server.start(timeout=self.start_timeout)
        restart = Action("restart", reason, time.monotonic() - start)
        self.actions.append(restart)
        self.log(f"tritonserver serving again after {restart.seconds:.1f} s")
        return restart
