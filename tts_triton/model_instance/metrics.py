"""Triton custom metrics updated in batches, off the request path.

An update of a ``pb_utils`` metric is a blocking round trip from the model's stub process to the server process
(python_backend's ``Metric::SendIncrementRequest``: shared memory, a message, a wait for the answer). Made where a
request is served, each one held up what made it: the network models sent three per execution (the seconds of
each phase) before their responses went back, and the BLS three per ``tts`` request on the event loop that runs
every stream of its instance. :class:`MetricBatch` adds each metric's increments up and sends the sums from a timer
thread at most :data:`FLUSH_S` after the first of them, or at once on :meth:`MetricBatch.flush` (the BLS calls it
when its last request ends, so an idle server's metrics are exact; a model's ``finalize`` calls :meth:`close`).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

__all__ = ["FLUSH_S", "MetricBatch"]

#: Seconds an increment may wait for the ones after it: Prometheus scrapes every few seconds, so the lag is not seen.
FLUSH_S = 0.5


class Incrementable(Protocol):
    def increment(self, value: float) -> Any: ...


class MetricBatch:
    """Sums of increments per metric, sent within ``every`` seconds of the first one pending; thread-safe."""

    def __init__(self, every: float = FLUSH_S) -> None:
        self.every = every
        self._sums: dict[Incrementable, float] = {}
        self._lock = threading.Lock()  # the sums and the timer
        self._sending = threading.Lock()  # one flush at a time: close() returns after any flush under way
        self._timer: threading.Timer | None = None
        self._closed = False

    def add(self, metric: Incrementable, value: float) -> None:
        """Increment ``metric`` by ``value`` within :attr:`every` seconds."""
        with self._lock:
            self._sums[metric] = self._sums.get(metric, 0.0) + value
            if self._timer is None and not self._closed:
                self._timer = threading.Timer(self.every, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Send every pending sum now."""
        with self._sending:
            with self._lock:
                sums, self._sums = self._sums, {}
                if self._timer is not None:
                    self._timer.cancel()  # a no-op from the timer's own thread
                    self._timer = None
            for metric, value in sums.items():
                if value:
                    metric.increment(value)

    def close(self) -> None:
        """Send what is pending, after any flush under way, and start no timer again: no update follows its return
        (the metrics may be deleted then)."""
        with self._lock:
            self._closed = True
        self.flush()
