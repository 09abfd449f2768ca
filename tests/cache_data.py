"""What the utterance cache's tests share: a deployment, its sample rate, chunks of a stream to store, a counting
meter and a cache that reports to it."""

from __future__ import annotations

import collections
import time
import typing

import numpy as np

from tts_triton.cache import CacheSettings, UtteranceCache
from tts_triton.serving.pipeline import Chunk

DEPLOYMENT = {"checkpoint_sha256": "ab" * 32, "target": "onnxruntime-python", "model_config": {"n_mels": 80}}
RATE = 22050


def stream_chunks(rng: np.random.Generator, sizes: tuple[int, ...] = (2048, 4096, 1024)) -> list[Chunk]:
    """Chunks of random audio (some past full scale) and mels, two to a sentence."""
    return [Chunk(audio=rng.uniform(-1.1, 1.1, n).astype(np.float32),
                  mel=rng.standard_normal((n // 256, 80)).astype(np.float32), sentence=i // 2)
            for i, n in enumerate(sizes)]


class CountingMeter:
    """A cache meter that counts what it is told, by event."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    def lookup(self, outcome: str) -> None:
        self.counts[f"lookup:{outcome}"] += 1

    def bytes(self, direction: str, count: int) -> None:
        self.counts[f"bytes:{direction}"] += count

    def write(self, outcome: str) -> None:
        self.counts[f"write:{outcome}"] += 1


def counted_cache(url: str, **overrides: typing.Any) -> tuple[UtteranceCache, CountingMeter]:
    """A cache of Redis ``url`` in a namespace of its own, and its meter; ``overrides`` go to CacheSettings."""
    meter = CountingMeter()
    settings = CacheSettings(url, namespace=f"test-{time.monotonic_ns()}", **overrides)
    return UtteranceCache(settings, DEPLOYMENT, sample_rate=RATE, meter=meter), meter
