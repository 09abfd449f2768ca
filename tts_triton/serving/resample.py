"""A stream's audio at the rate the client asked for (``OUTPUT_SAMPLE_RATE``), resampled as it streams.

One soxr streaming resampler per request carries its filter state from chunk to chunk, so the chunks join
without a seam into what resampling the whole utterance gives; the filter's last samples come with the chunk marked
``last``, or as one more audio-only chunk at the end when none was. At the model's own rate the chunks pass untouched.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import numpy as np

from tts_triton.core import audio
from tts_triton.serving.pipeline import Chunk


async def resampled(chunks: AsyncIterator[Chunk], rate: int) -> AsyncIterator[Chunk]:
    """``chunks`` (at ``audio.SAMPLE_RATE``) with their audio at ``rate`` Hz and ``sample_rate`` set to it."""
    if rate == audio.SAMPLE_RATE:
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                yield chunk
        return
    import soxr  # the serve extra

    resampler = soxr.ResampleStream(audio.SAMPLE_RATE, rate, 1, dtype="float32", quality="HQ")
    latest: Chunk | None = None
    async with contextlib.aclosing(chunks):
        async for chunk in chunks:
            # a chunk marked last takes the resampler's tail with it
            samples = resampler.resample_chunk(np.ascontiguousarray(chunk.audio, np.float32), last=chunk.last)
            latest = dataclasses.replace(chunk, audio=samples, sample_rate=rate)
            yield latest
    if latest is not None and not latest.last:
        tail = resampler.resample_chunk(np.zeros(0, np.float32), last=True)
        if tail.size:
            yield Chunk(tail, latest.mel[:0], latest.sentence, sample_rate=rate)
