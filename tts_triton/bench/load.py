"""Load generation: closed-loop streams against a client (the served ``tts`` or the in-process baseline)."""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tts_triton.bench.stats import LevelResult, MemorySample, flatten_stats
from tts_triton.bench.workload import RequestRecord, Workload
from tts_triton.jobs.progress import ProgressLine

__all__ = ["MIN_MEASURED", "LoadLevel", "one_stream", "run_soak", "wait_idle", "warm_up"]

_REPORT_EVERY = 10.0  # seconds between progress lines within a level
_BACKOFF = 0.5  # seconds a worker waits after a failed request: do not hammer a failing server


def now() -> float:
    """The bench's clock, seconds."""
    return time.perf_counter()


#: Requests a level measures even when its window has passed (a p99 needs some).
MIN_MEASURED = 32


async def one_stream(client: Any, record: RequestRecord, t0: float, workload: Workload | None = None) -> None:
    """Stream ``record.text`` through ``client.stream(text)``, filling in the record as chunks arrive (the record
    is complete even when this task is cancelled midway); a completed text is reported to ``workload``."""
    from tts_triton.client import TTSError

    try:
        async for chunk in client.stream(record.text):
            if record.first_chunk is None:
                record.first_chunk = now() - t0
            record.chunks += 1
            record.audio_seconds += chunk.audio.shape[0] / chunk.sample_rate
        record.end = now() - t0
    except TTSError as err:
        record.error = f"{type(err).__name__}: {err}"
    if record.ok and workload is not None:
        workload.completed(record.text)


class ControlledClient:
    """A streaming client whose every ``stream(text)`` carries the same speech controls (``speed=``, ``pitch=``,
    ``volume=``; see :data:`~tts_triton.core.contract.CONTROLS`)."""

    def __init__(self, client: Any, **controls: float) -> None:
        self.client = client
        self.controls = controls

    def stream(self, text: str) -> Any:
        return self.client.stream(text, **self.controls)


class LoadLevel:
    """One level: ``concurrency`` closed-loop workers hold that many streams in flight.

    Each worker's first request is not measured: those C open at the same instant, a burst the steady load never
    sees (recorded as ``opening``). The requests started from then on, within ``seconds`` of the first of them (at
    most ``requests``; None: no cap, the window alone bounds them, but at least MIN_MEASURED) are measured;
    afterwards the workers keep C streams in flight with unmeasured fillers. The
    load ends when the measured ones all finished or ``seconds + grace`` passed since the first of them (or the
    level) started. Streams still running then may finish within ``grace`` more seconds (audio they receive after
    the end does not count); only what runs after that is cancelled: Triton 2.51's gRPC frontend can crash on a
    cancel that races a stream's completion (triton-inference-server/server#7840, fixed in 2.53).
    """

    def __init__(self, client: Any, workload: Workload, concurrency: int, requests: int | None, seconds: float,
                 grace: float, label: str = "") -> None:
        self.client, self.workload = client, workload
        self.concurrency, self.requests, self.seconds, self.grace = concurrency, requests, seconds, grace
        self.records: list[RequestRecord] = []
        self.measured = 0
        self.t0 = now()
        self.window_start: float | None = None  # when the first measured request started
        self.loading = False
        self.progress = ProgressLine(f"    {label}c={concurrency}", total=requests, every=_REPORT_EVERY,
                                     stream=sys.stdout)

    def issuing(self) -> bool:
        """Whether a request started now is measured."""
        if self.requests is not None and self.measured >= self.requests:
            return False
        return (self.measured < MIN_MEASURED or self.window_start is None
                or now() - self.window_start < self.seconds)

    def pending(self) -> int:
        """Measured requests still running."""
        return sum(r.measured and r.end is None and r.error is None for r in self.records)

    def _over(self) -> bool:
        started = self.t0 if self.window_start is None else self.window_start
        return (not self.issuing() and self.pending() == 0) or now() - started >= self.seconds + self.grace

    async def _worker(self) -> None:
        opening = True
        while self.loading:
            measured = not opening and self.issuing()
            if measured and self.window_start is None:
                self.window_start = now()
            self.measured += measured
            index, text, repeat = self.workload.next()
            record = RequestRecord(index=index, start=now() - self.t0, measured=measured, opening=opening, text=text,
                                   repeat=repeat)
            opening = False
            self.records.append(record)
            await one_stream(self.client, record, self.t0, self.workload)
            if record.error:
                await asyncio.sleep(_BACKOFF)

    async def run(self) -> LevelResult:
        """Run the level; the result has no model statistics, CPU usage or cache lookups yet."""
        self.t0, self.loading = now(), True
        workers = [asyncio.create_task(self._worker()) for _ in range(self.concurrency)]
        try:
            while not self._over():
                await asyncio.sleep(0.1)
                done = sum(r.measured and r.end is not None for r in self.records)
                self.progress.update(done, f"{self.pending()} measured in flight"
                                           f"{'' if self.issuing() else ', draining'}")
        finally:
            loaded, self.loading = now() - self.t0, False
            for record in self.records:
                record.audio_when_loaded = record.audio_seconds
            _, running = await asyncio.wait(workers, timeout=self.grace)
            for task in running:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            for record in self.records:  # a measured stream that outlived the load stays cut off
                if record.measured and record.end is not None and record.end > loaded:
                    record.end = None
            self.progress.close()
        return LevelResult(self.concurrency, self.records, loaded, repeat_ratio=self.workload.repeat_ratio)


async def warm_up(client: Any, workload: Workload, requests: int, say: Callable[[str], None]) -> None:
    """``requests`` unmeasured streams one at a time; raises TTSError if one fails."""
    from tts_triton.client import TTSError

    for i in range(requests):
        index, text, repeat = workload.next()
        record = RequestRecord(index=index, start=0.0, measured=False, text=text, repeat=repeat)
        await one_stream(client, record, now(), workload)
        if record.error:
            raise TTSError(f"warm-up request failed: {record.error}")
        say(f"warm-up {i + 1}/{requests}: {record.audio_seconds:.1f} s of audio in {record.end or math.nan:.2f} s")


async def run_soak(level: LoadLevel, sample: Callable[[str], Awaitable[MemorySample]],
                   every: float) -> tuple[LevelResult, list[MemorySample]]:
    """Run ``level`` while ``sample(label)`` records GPU memory every ``every`` seconds, and once at the end."""
    samples: list[MemorySample] = []

    async def sampling() -> None:
        while True:
            samples.append(await sample("soak"))
            await asyncio.sleep(every)

    sampler = asyncio.create_task(sampling())
    try:
        result = await level.run()
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    samples.append(await sample("soak end"))
    return result, samples


async def _stats(server: Any) -> dict[str, dict[str, int]]:
    return flatten_stats(await server.get_inference_statistics(as_json=True))


async def wait_idle(server: Any, quiet: float = 2.0, timeout: float = 60.0) -> dict[str, dict[str, int]]:
    """Statistics once no model's counters changed for ``quiet`` seconds (cancelled streams stop only
    between decoder calls), or after ``timeout``."""
    deadline = now() + timeout
    last = await _stats(server)
    since = now()
    while now() < deadline and now() - since < quiet:
        await asyncio.sleep(0.25)
        current = await _stats(server)
        if current != last:
            last, since = current, now()
    return last
