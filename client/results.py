"""What the client returns: streamed chunks, whole syntheses and the server's voice bank."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core.layout import VOICE_BANK
from tts_triton.core.voices import VoiceBank

from .audio_io import save_wav
from .errors import TTSError

__all__ = ["AudioChunk", "Synthesis", "VoiceCatalog", "Word"]


@dataclass(frozen=True)
class Word:
    """A spoken word: seconds ``[start, end)`` on the request's audio, characters ``[text_start, text_end)``
    of the request's text (the source token for a reading: "03/14" for each word read from it)."""

    word: str
    start: float
    end: float
    text_start: int
    text_end: int

    @classmethod
    def parse(cls, raw: bytes | str) -> tuple[Word, ...]:
        """The words of one WORDS output (a JSON list). Raises :class:`TTSError` if it is not one."""
        try:
            return tuple(cls(str(w["word"]), float(w["start"]), float(w["end"]), int(w["text_start"]),
                             int(w["text_end"])) for w in json.loads(raw))
        except (KeyError, TypeError, ValueError) as e:
            raise TTSError(f"the server sent a malformed WORDS output: {e!r}") from e


@dataclass(frozen=True)
class AudioChunk:
    """One streamed piece of audio.

    ``audio`` is mono float32 in [-1, 1]; ``index`` counts chunks from 0; ``elapsed`` is seconds from
    the start of the request to this chunk's arrival; ``mel`` (``[frames, n_mels]`` float32) is set
    only when the request asked for it; ``words``, when it asked for them, are the words this chunk completes.
    """

    audio: np.ndarray
    sample_rate: int
    index: int
    elapsed: float
    mel: np.ndarray | None = None
    words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Synthesis:
    """A whole utterance: the chunks joined, with the request's timing.

    ``first_chunk_latency`` and ``total_time`` are seconds from the start of the request to the first
    audio and to the end of the response; ``chunks`` is how many pieces the audio came in (1 over HTTP).
    """

    audio: np.ndarray
    sample_rate: int
    first_chunk_latency: float
    total_time: float
    chunks: int
    mel: np.ndarray | None = None
    words: tuple[Word, ...] = ()

    @classmethod
    def from_chunks(cls, chunks: Sequence[AudioChunk], total_time: float) -> Synthesis:
        """Join streamed chunks. Raises :class:`TTSError` if there are none or their sample rates differ."""
        if not chunks:
            raise TTSError("the server ended the response without any audio")
        rates = {c.sample_rate for c in chunks}
        if len(rates) != 1:
            raise TTSError(f"the server changed SAMPLE_RATE within one response: {sorted(rates)}")
        mels = [c.mel for c in chunks if c.mel is not None]
        return cls(
            audio=np.concatenate([c.audio for c in chunks]),
            sample_rate=chunks[0].sample_rate,
            first_chunk_latency=chunks[0].elapsed,
            total_time=total_time,
            chunks=len(chunks),
            mel=np.concatenate(mels) if mels else None,
            words=tuple(w for c in chunks for w in c.words),
        )

    @property
    def duration(self) -> float:
        """Seconds of audio."""
        return self.audio.shape[0] / self.sample_rate

    @property
    def real_time_factor(self) -> float:
        """``total_time / duration``: below 1 is faster than real time."""
        return self.total_time / self.duration if self.duration else float("inf")

    def save(self, path: str | os.PathLike) -> Path:
        """Write the audio as 16-bit PCM WAV (see :func:`save_wav`)."""
        return save_wav(path, self.audio, self.sample_rate)


@dataclass(frozen=True)
class VoiceCatalog:
    """The voices and emotions the server offers, and what it uses when a request names none (the names of its
    voice bank, without the style vectors)."""

    voices: tuple[str, ...]
    emotions: tuple[str, ...]
    default_voice: str
    default_emotion: str

    @classmethod
    def from_model_config(cls, config: dict[str, Any]) -> VoiceCatalog:
        """Parse the ``voice_bank`` parameter (VoiceBank JSON) of a model config, as returned by
        ``get_model_config`` of tritonclient's gRPC (``{"config": {...}}``) or HTTP client."""
        config = config.get("config", config)
        name = config.get("name", "?")
        try:
            text = config["parameters"][VOICE_BANK]["string_value"]
            bank = VoiceBank.from_json(text, f"the 'voice_bank' parameter of model {name!r}")
        except (KeyError, TypeError) as e:
            raise TTSError(f"model {name!r} has no valid 'voice_bank' parameter: {e!r}") from e
        except ValueError as e:
            raise TTSError(str(e)) from e
        return cls(tuple(bank.voices), tuple(bank.emotions), bank.default_voice, bank.default_emotion)
