"""The eager baseline: the project's PyTorch stages in process, batch 1, through the same decode loop and the same
level rules as the served levels (run in a child process, so that its device memory is gone before the server's
is measured)."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from tts_triton.bench.load import LoadLevel, warm_up
from tts_triton.bench.report import level_line
from tts_triton.bench.stats import CpuSample, LevelResult, summarize
from tts_triton.bench.workload import Workload
from tts_triton.core import audio

__all__ = ["BaselinePlan", "InProcessClient", "baseline_device", "measure_baseline", "run_baseline"]


@dataclass(frozen=True)
class _AudioChunk:
    audio: Any
    sample_rate: int


class InProcessClient:
    """The part of :class:`~tts_triton.client.AsyncTTSClient` that :class:`~tts_triton.bench.load.LoadLevel` uses
    (``stream(text)``), served in this process by a :class:`~tts_triton.serving.voice.Voice` (the decode core over
    the PyTorch stages). After every chunk the stream yields to the event loop, so that concurrent streams take turns
    chunk by chunk."""

    def __init__(self, voice: Any) -> None:
        self.voice = voice

    async def stream(self, text: str) -> AsyncIterator[_AudioChunk]:
        """The chunks of ``text`` with the default voice and emotion."""
        async for chunk in self.voice.stream(text):
            yield _AudioChunk(chunk.audio, audio.SAMPLE_RATE)
            await asyncio.sleep(0)


@dataclass(frozen=True)
class BaselinePlan:
    """How to measure the eager baseline: device, levels, the same per-level rules and text mix (repeat ratio) as
    the served levels."""

    device: str
    concurrency: tuple[int, ...]
    requests: int | None
    seconds: float
    grace: float
    warmup: int
    repeat_ratio: float | None = None


def measure_baseline(plan: BaselinePlan) -> list[LevelResult]:
    """The eager baseline (see :class:`InProcessClient`): the default checkpoint's PyTorch stages (fp32, batch 1) on
    ``plan.device`` through ``TTSService``, at each of ``plan.concurrency``."""
    # the model stack (torch): heavy, and not needed to benchmark a server
    from tts_triton.models.checkpoint import DEFAULT_VOICE_BANK
    from tts_triton.serving.voice import Voice

    client = InProcessClient(Voice.load(bank=DEFAULT_VOICE_BANK, device=plan.device))
    return asyncio.run(_baseline_levels(client, plan, f"eager {plan.device}"))


async def _baseline_levels(client: InProcessClient, plan: BaselinePlan, runtime: str) -> list[LevelResult]:
    def say(message: str) -> None:
        print(message, flush=True)

    workload = Workload(plan.repeat_ratio)
    await warm_up(client, workload, plan.warmup, say)
    levels = []
    for concurrency in plan.concurrency:
        say(f"{runtime} c={concurrency}: measured requests start within {plan.seconds:g} s")
        cpu_before = CpuSample.read()
        level = await LoadLevel(client, workload, concurrency, plan.requests, plan.seconds, plan.grace).run()
        level.cpu_busy, level.cpu_steal, level.cpu_own = CpuSample.usage(cpu_before, CpuSample.read())
        levels.append(level)
        say(level_line(summarize(level), runtime))
    return levels


def run_baseline(plan: BaselinePlan, say: Callable[[str], None]) -> tuple[list[LevelResult], str]:
    """:func:`measure_baseline` in a child process (its device memory is gone when it exits): (levels, '') or, when
    it failed, ([], what went wrong), so that the served levels are still measured."""
    say(f"eager baseline on {plan.device} at c={' '.join(map(str, plan.concurrency))} (in a child process) ...")
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(measure_baseline, plan).result(), ""
    except Exception as err:  # anything the child raised, or its death: reported, and the run goes on
        say(f"error: the eager baseline failed: {type(err).__name__}: {err}")
        return [], f"**The eager baseline on {plan.device} failed**: `{type(err).__name__}: {err}`"


def baseline_device(choice: str) -> str | None:
    """The eager baseline's device for ``--baseline-device``; raises ValueError for cuda on a host without CUDA."""
    if choice == "none":
        return None
    if choice == "cpu":
        return "cpu"
    from tts_triton.export.targets import cuda_torch

    available, found = cuda_torch()
    if choice == "cuda" and not available:
        raise ValueError(f"--baseline-device cuda: no CUDA here ({found}; use cpu or none)")
    return "cuda" if available else None
