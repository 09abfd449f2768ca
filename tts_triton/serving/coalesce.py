"""One network request per batch of concurrent streams instead of one per stream.

Every stream of a BLS instance runs its own decode loop and asks for one row at a time. Sent as they are,
256 streams make 256 requests per step, and each request costs Triton, the network model's stub and its
Python the same work whatever its size: that per-request work, not the GPU, bounded the served throughput
(docs/records/bench/history.md). :class:`Coalescer` sits between the streams and the backend: the calls
for one network that the streams of an event loop make at about the same moment (until a loop iteration
passes without a new one) are merged into as few requests as their shapes allow
(:func:`~tts_triton.engine.batching.batch_groups`, zero-padded along the network's masked axes like the
network model itself does), at most ``max_rows`` rows each, and each stream gets its own rows back. While
only one stream is open, its calls go straight through (nobody could join them, and a wait would delay its
first chunk); otherwise a lone call goes out one loop iteration later, microseconds. A stream whose call was
cancelled gets nothing and the others are unaffected; a failed request fails each of its callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tts_triton.core.contract import ModelSpec
from tts_triton.engine.batching import Feed, Padding, batch_groups, merge, rows, split
from tts_triton.serving.pipeline import InferBackend, served_ensembles

__all__ = ["Coalescer"]

#: Loop iterations a model's collected calls may wait for more to arrive (each must bring at least one new
#: call): streams woken together issue their next calls within a few iterations of each other.
MAX_DEFERRALS = 4


@dataclass
class _Pending:
    calls: list[tuple[Feed, asyncio.Future[dict[str, np.ndarray]]]] = field(default_factory=list)
    seen: int = 0  # calls when the tick was scheduled: more by the time it runs, and it waits another iteration
    deferrals: int = 0


class Coalescer:
    """An :class:`~tts_triton.serving.pipeline.InferBackend` that merges concurrent calls to ``backend``.

    ``specs`` names the models it may merge (their masked axes say which shapes pad together) and
    ``max_rows`` each one's most rows per request (Triton's ``max_batch_size``); calls to any other model
    go straight through, and so does every call while ``streams()`` (the streams open on this loop, if
    given) is at most 1. All calls must come from one event loop. It serves the ensembles ``backend`` serves."""

    def __init__(self, backend: InferBackend, specs: Mapping[str, ModelSpec], max_rows: Mapping[str, int],
                 streams: Callable[[], int] | None = None) -> None:
        self.backend = backend
        self.ensembles = served_ensembles(backend)
        self.streams = streams
        self.padding = {name: Padding.of(spec) for name, spec in specs.items() if name in max_rows}
        self.max_rows = dict(max_rows)
        self._pending: dict[str, _Pending] = {}
        self._running: set[asyncio.Task] = set()

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if model not in self.padding or (self.streams is not None and self.streams() <= 1):
            return await self.backend.infer(model, inputs)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, np.ndarray]] = loop.create_future()
        pending = self._pending.get(model)
        if pending is None:
            pending = self._pending[model] = _Pending(seen=1)
            loop.call_soon(self._tick, model)
        pending.calls.append((inputs, future))
        return await future

    def _tick(self, model: str) -> None:
        """Send ``model``'s collected calls, unless new ones came in the last iteration (and it may wait on)."""
        pending = self._pending[model]
        if len(pending.calls) > pending.seen and pending.deferrals < MAX_DEFERRALS:
            pending.seen, pending.deferrals = len(pending.calls), pending.deferrals + 1
            asyncio.get_running_loop().call_soon(self._tick, model)
            return
        del self._pending[model]
        calls = [(feed, future) for feed, future in pending.calls if not future.done()]  # done: cancelled
        if not calls:
            return
        feeds = [feed for feed, _ in calls]
        for group in batch_groups(feeds, padding=self.padding[model]) if len(calls) > 1 else [[0]]:
            batch, taken = [], 0
            for i in group:  # requests of at most max_rows rows (a larger call goes alone)
                if batch and taken + rows(feeds[i]) > self.max_rows[model]:
                    self._start(model, batch)
                    batch, taken = [], 0
                batch.append(calls[i])
                taken += rows(feeds[i])
            self._start(model, batch)

    def _start(self, model: str, calls: list[tuple[Feed, asyncio.Future[dict[str, np.ndarray]]]]) -> None:
        task = asyncio.ensure_future(self._send(model, calls))
        self._running.add(task)  # the loop holds tasks weakly
        task.add_done_callback(self._running.discard)

    async def _send(self, model: str, calls: list[tuple[Feed, asyncio.Future[dict[str, np.ndarray]]]]) -> None:
        feeds = [feed for feed, _ in calls]
        padding = self.padding[model]
        try:
            outputs = await self.backend.infer(model, merge(feeds, padding))
            parts = split(outputs, feeds, padding) if len(feeds) > 1 else [outputs]
        except Exception as err:  # each caller is told
            for _, future in calls:
                if not future.done():
                    future.set_exception(err)
            return
        for (_, future), part in zip(calls, parts, strict=True):
            if not future.done():
                future.set_result(part)
