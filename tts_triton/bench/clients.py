"""A level's streams spread over several client processes, so that the load generator is not the wall.

One asyncio process drives every stream of a :class:`~tts_triton.bench.load.LoadLevel`: each request costs it a new
gRPC call, a write, a half-close and a read per chunk, all on one core (docs/records/bench/host-python.md
measured the client's own share). :class:`SplitLevel` runs a level's C workers in P processes instead, each with
its own :class:`~tts_triton.client.AsyncTTSClient` and its own share of the workers (and of ``--requests``), all
started at one instant and merged onto one clock, so its result reads like a one-process level's: the records of
every process (times from the common start), the loaded time from that start to the last process's end of load.

Each process measures like a one-process level (its opening burst, its own window of ``seconds``, at least
:data:`~tts_triton.bench.load.MIN_MEASURED` measured requests) and cycles the sentence set from the start; with a
repeat ratio it may repeat the texts the run had completed before the level and those it completes itself.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from tts_triton.bench.load import ControlledClient, LoadLevel, now
from tts_triton.bench.stats import LevelResult
from tts_triton.bench.workload import RequestRecord, Workload

__all__ = ["STREAMS_PER_PROCESS", "ClientPool", "SplitLevel", "client_processes"]

#: Streams one client process holds before the next process is added (up to 32 the bench runs one process, as
#: every level did before the load was split).
STREAMS_PER_PROCESS = 32
#: Seconds the processes are given to reach the common start: the pool's processes are up (ClientPool starts them
#: all before the first level); this covers handing them the level and opening their gRPC channels.
_START_AFTER = 1.0
#: Seconds each process's start-up task holds it, so that the pool's tasks land on as many processes.
_HOLD_S = 0.5


def client_processes(concurrency: int, cpus: int | None = None) -> int:
    """The default number of client processes at ``concurrency``: one per :data:`STREAMS_PER_PROCESS` streams, at
    most a quarter of the host's cores (the server shares the host) and at least one."""
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(math.ceil(concurrency / STREAMS_PER_PROCESS), cpus // 4))


@dataclass(frozen=True)
class _Part:
    """What one client process runs: its share of a level."""

    url: str
    controls: dict[str, float]
    concurrency: int
    requests: int | None
    seconds: float
    grace: float
    label: str
    start_at: float  # the common start, on :func:`~tts_triton.bench.load.now`'s clock (CLOCK_MONOTONIC: one per host)
    repeat_ratio: float | None
    seed: int
    code_start: int
    code_stride: int
    known: tuple[str, ...]


def _start_up() -> None:
    """In a new client process: import what a level needs, then hold the process a moment (see ClientPool)."""
    import tts_triton.client  # noqa: F401  (the client library and tritonclient: seconds at the first import)

    time.sleep(_HOLD_S)


def _run_part(part: _Part) -> tuple[float, LevelResult]:
    """In a client process: (its level's start, its result)."""
    return asyncio.run(_part_level(part))


async def _part_level(part: _Part) -> tuple[float, LevelResult]:
    from tts_triton.client import AsyncTTSClient

    workload = Workload(part.repeat_ratio, seed=part.seed, code_start=part.code_start, code_stride=part.code_stride)
    for text in part.known:
        workload.completed(text)
    async with AsyncTTSClient(part.url) as plain:
        client = ControlledClient(plain, **part.controls)
        await asyncio.sleep(max(0.0, part.start_at - now()))
        level = LoadLevel(client, workload, part.concurrency, part.requests, part.seconds, part.grace, part.label)
        result = await level.run()
    return level.t0, result


class ClientPool:
    """``processes`` spawned client processes for the levels of one run (spawned, not forked: the bench's own gRPC
    channels must not be copied), started and ready on entering the context manager, shut down on leaving it."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))

    def __enter__(self) -> ClientPool:
        for started in [self._pool.submit(_start_up) for _ in range(self.processes)]:  # one per process, at once
            started.result()
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    async def run(self, parts: Sequence[_Part]) -> list[tuple[float, LevelResult]]:
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*(loop.run_in_executor(self._pool, _run_part, p) for p in parts)))


def _shares(total: int | None, parts: int) -> list[int | None]:
    """``total`` split into ``parts`` near-equal shares (None: no cap for any)."""
    if total is None:
        return [None] * parts
    return [total // parts + (i < total % parts) for i in range(parts)]


class SplitLevel:
    """A :class:`~tts_triton.bench.load.LoadLevel` whose ``concurrency`` workers run in ``processes`` client processes
    of ``pool`` (see the module docstring); ``run()`` gives the merged :class:`LevelResult`."""

    def __init__(self, pool: ClientPool, url: str, controls: dict[str, float], workload: Workload, concurrency: int,
                 requests: int | None, seconds: float, grace: float, processes: int, label: str = "") -> None:
        if not 1 <= processes <= min(pool.processes, concurrency):
            raise ValueError(f"{processes} client processes for {concurrency} streams in a pool of {pool.processes}")
        self.pool, self.url, self.controls, self.workload = pool, url, controls, workload
        self.concurrency, self.requests, self.seconds, self.grace = concurrency, requests, seconds, grace
        self.processes, self.label = processes, label

    def parts(self, start_at: float) -> list[_Part]:
        known = tuple(self.workload.known())
        shares = zip(_shares(self.concurrency, self.processes), _shares(self.requests, self.processes),
                     self.workload.beside(self.processes), strict=True)
        return [_Part(self.url, self.controls, streams, requests, self.seconds, self.grace,
                      f"{self.label}client {i + 1}/{self.processes} ", start_at, self.workload.repeat_ratio,
                      seed=i, code_start=start, code_stride=stride, known=known)
                for i, (streams, requests, (start, stride)) in enumerate(shares)]

    async def run(self) -> LevelResult:
        """Run the level; the result has no model statistics, CPU usage or cache lookups yet."""
        start = now() + _START_AFTER
        results = await self.pool.run(self.parts(start))
        records: list[RequestRecord] = []
        loaded, drawn = 0.0, 0
        for t0, result in results:
            shift = t0 - start
            if self.workload.repeat_ratio is not None:  # each new text drew one code
                drawn = max(drawn, sum(not r.repeat for r in result.records))
            for r in result.records:
                records.append(replace(r, start=r.start + shift,
                                       first_chunk=None if r.first_chunk is None else r.first_chunk + shift,
                                       end=None if r.end is None else r.end + shift))
                if r.ok:
                    self.workload.completed(r.text)
            loaded = max(loaded, shift + result.loaded_seconds)
        self.workload.skip_codes(drawn * self.processes)
        return LevelResult(self.concurrency, records, loaded, repeat_ratio=self.workload.repeat_ratio,
                           clients=self.processes)
