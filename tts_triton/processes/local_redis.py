"""A private ``redis-server`` (the Debian package's binary) on a free loopback port: the cache of a
benchmark run (``tts-triton bench --cache``) and of the test suite. No persistence, ``DEBUG`` allowed from
loopback only (``DEBUG SLEEP`` stalls it, for tests); :meth:`LocalRedis.stop` kills it."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tts_triton.processes.ports import free_port


class LocalRedis:
    """``start`` / ``kill`` (SIGKILL, as a crash) / ``stop``; a restart keeps the port and starts empty."""

    def __init__(self, log_dir: Path, port: int | None = None, password: str | None = None,
                 maxmemory: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (Debian package redis-server; scripts/setup.sh)")
        self.binary = binary
        self.port = port or free_port()
        self.password = password
        self.maxmemory = maxmemory
        self.log_file = Path(log_dir) / f"redis-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        """A synchronous ``redis.Redis`` client of this server."""
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=10)

    def start(self, timeout: float = 10) -> LocalRedis:
        """Start and wait until it answers PING; ``RuntimeError`` (naming the log) if it does not."""
        import redis

        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--enable-debug-command", "local", "--daemonize", "no", "--logfile", str(self.log_file)]
        if self.password:
            args += ["--requirepass", self.password]
        if self.maxmemory:
            args += ["--maxmemory", self.maxmemory, "--maxmemory-policy", "allkeys-lru"]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.client().ping():
                    return self
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not start on port {self.port}; see {self.log_file}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash; the next ``start`` begins with an empty database."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    stop = kill

    def __enter__(self) -> LocalRedis:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
