"""A trained voice in this process: the one way to assemble the in-process synthesizer.

    voice = Voice.load()  # the shipped default voice and its voice bank
    speech = voice.synthesize("Turn left here.", voice="f2", emotion="happy", speed=1.2)
    audio.save_wav("out.wav", speech.audio, speech.sample_rate)

:meth:`Voice.synthesize` goes the way a served ``tts`` request goes (:class:`~tts_triton.serving.service.TTSService`:
plain text or SSML, the bank's presets, the speech controls, word timestamps), with the checkpoint's networks
called in process (:class:`~tts_triton.serving.in_process.TorchBackend`) instead of through Triton. Callers that
bring their own sentences and styles take :meth:`Voice.pipeline`; those that wrap or inspect the network calls take
:attr:`Voice.backend`. Needs the ``model`` extra (torch).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from tts_triton.core import audio
from tts_triton.core.config import STREAMING, ModelConfig, StreamingConfig
from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.core.voices import VoiceBank
from tts_triton.models.checkpoint import DEFAULT_VOICE_BANK, Checkpoint, resolve
from tts_triton.serving.in_process import TorchBackend
from tts_triton.serving.pipeline import Chunk, Pipeline
from tts_triton.serving.service import SynthesisRequest, TTSService
from tts_triton.serving.words import WordTime

__all__ = ["Speech", "Voice"]


@dataclass(frozen=True)
class Speech:
    """One synthesized text: ``audio`` float32 mono at ``sample_rate``; ``words`` its word timestamps when they were
    asked for (else empty)."""

    audio: np.ndarray
    sample_rate: int = audio.SAMPLE_RATE
    words: list[WordTime] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


class Voice:
    """A checkpoint's networks on ``device`` behind the decode core, with the voice bank whose presets
    :meth:`synthesize` names (None: only :meth:`pipeline` and :attr:`backend` serve)."""

    def __init__(self, checkpoint: Checkpoint, bank: VoiceBank | None = None, *, device: str | torch.device = "cpu",
                 streaming: StreamingConfig = STREAMING) -> None:
        self.checkpoint = checkpoint
        self.bank = bank
        self.streaming = streaming
        #: The networks in process (fp32, no grad), stage modules under ``backend.stages``.
        self.backend = TorchBackend(checkpoint.stages(), checkpoint.config, device)
        self._service = TTSService(checkpoint.config, bank, streaming) if bank is not None else None

    @classmethod
    def load(cls, path: Path | str | None = None, *, bank: Path | str | VoiceBank | None = None,
             device: str | torch.device = "cpu") -> Voice:
        """The checkpoint file at ``path`` (None: the shipped default voice) with ``bank``: a voice bank file or
        object; None: ``voice_bank.json`` beside the checkpoint, or the default voice's bank for the default voice
        (none when neither exists). A file that is no checkpoint raises ``ValueError`` naming it."""
        checkpoint = resolve(Path(path) if path is not None else None)
        if bank is None:
            beside = Path(path).with_name(VOICE_BANK_FILE) if path is not None else DEFAULT_VOICE_BANK
            bank = beside if beside.exists() else None
        if bank is not None and not isinstance(bank, VoiceBank):
            bank = VoiceBank.load(Path(bank))
        return cls(checkpoint, bank, device=device)

    @property
    def config(self) -> ModelConfig:
        return self.checkpoint.config

    def pipeline(self) -> Pipeline:
        """The decode core over this voice's networks: sentences and a style in, chunks out."""
        return Pipeline(self.backend, self.config, self.streaming)

    async def stream(self, text: str, voice: str | None = None, emotion: str | None = None, *, speed: float = 1.0,
                     pitch: float = 0.0, volume: float = 0.0, words: bool = False) -> AsyncIterator[Chunk]:
        """The chunks of ``text`` (plain or SSML) as the served ``tts`` model streams them. Bad input raises
        :class:`~tts_triton.errors.InvalidInput` naming it before the first chunk; no voice bank: ``ValueError``."""
        if self._service is None:
            raise ValueError("this Voice has no voice bank: pass bank= to Voice or Voice.load")
        request = SynthesisRequest(text, voice, emotion, speed=speed, pitch=pitch, volume=volume, words=words)
        async for chunk in self._service.stream(request, self.backend):
            yield chunk

    def synthesize(self, text: str, voice: str | None = None, emotion: str | None = None, *, speed: float = 1.0,
                   pitch: float = 0.0, volume: float = 0.0, words: bool = False) -> Speech:
        """``text`` whole, in the bank's preset of ``voice`` and ``emotion`` (None: the bank's defaults); see
        :meth:`stream`. Not from inside a running event loop (use :meth:`stream` there)."""

        async def collect() -> list[Chunk]:
            return [c async for c in self.stream(text, voice, emotion, speed=speed, pitch=pitch, volume=volume,
                                                 words=words)]

        chunks = asyncio.run(collect())
        samples = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        return Speech(samples, audio.SAMPLE_RATE, [w for c in chunks for w in c.words])
