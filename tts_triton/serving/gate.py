"""Fair order for the network calls of concurrent requests that share one event loop."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["ProgressGate"]


class ProgressGate:
    """Least-attained-service order for the network calls of concurrent requests on one event loop.

    A request may make its next call only while it is at most ``slack`` calls ahead of the least advanced
    request in progress: a short request sent while a long one runs is not queued behind the long one's
    calls, and requests of equal progress still run (and batch) together. A request held back goes anyway
    after ``max_wait`` seconds, so a steady stream of new requests slows a long one but cannot stop it.
    """

    def __init__(self, slack: int, max_wait: float) -> None:
        self.slack = slack
        self.max_wait = max_wait
        self.progress: dict[object, int] = {}
        self.changed = asyncio.Condition()

    def may_call(self, key: object) -> bool:
        return self.progress[key] <= min(self.progress.values()) + self.slack

    def enter(self, key: object) -> None:
        self.progress[key] = 0

    async def leave(self, key: object) -> None:
        del self.progress[key]
        async with self.changed:
            self.changed.notify_all()

    async def call(self, key: object) -> None:
        """Wait for this request's turn, then count its call."""
        async with self.changed:
            with contextlib.suppress(TimeoutError):  # waited long enough: go anyway
                await asyncio.wait_for(self.changed.wait_for(lambda: self.may_call(key)), self.max_wait)
            self.progress[key] += 1
            self.changed.notify_all()
