"""How long a request's audio will be, estimated from its text before any synthesis: the bound on audio seconds
per request (a few kilobytes of digits or SSML breaks must not buy hours of audio).

The estimate reads the text as the model will: normalised (numbers, dates and symbols in words: 4,096 digits are
~20,000 characters read), SSML's breaks in seconds and its prosody rates, all divided by the request's speed. It errs
short (a fast speaker's :data:`CHARS_PER_S`), so that only requests well past the bound are refused.
"""

from __future__ import annotations

import asyncio

from tts_triton.errors import InvalidInput
from tts_triton.text import normalize
from tts_triton.text.ssml import spoken_extent

__all__ = ["CHARS_PER_S", "audio_seconds", "estimate_audio_seconds"]

#: Characters of normalised text per second of speech at speed 1: fast English speech (usual speech reads 12-16).
CHARS_PER_S = 20.0
#: Characters estimated on the event loop; longer texts are normalised on a worker thread (4,096 digits: 0.5 s).
OFF_LOOP_CHARS = 1000


def audio_seconds(text: str, speed: float = 1.0) -> float:
    """Seconds of audio ``text`` (plain or SSML, which starts with ``<speak``) will make at ``speed``, estimated; 0
    for a text the front end refuses (Triton then answers it with a 400 naming the problem)."""
    try:
        if text.lstrip().startswith("<speak"):
            characters, pauses = spoken_extent(text.lstrip())
        else:
            characters, pauses = float(len(normalize(text))), 0.0
    except InvalidInput:
        return 0.0
    return (characters / CHARS_PER_S + pauses) / speed


async def estimate_audio_seconds(text: str, speed: float = 1.0) -> float:
    """:func:`audio_seconds`, off the event loop for a long text."""
    if len(text) < OFF_LOOP_CHARS:
        return audio_seconds(text, speed)
    return await asyncio.to_thread(audio_seconds, text, speed)
