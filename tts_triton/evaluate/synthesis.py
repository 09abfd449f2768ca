"""In-process synthesis for the evaluation and the scripts: the reference synthesizer with the decoder's attention
kept, copy-synthesis through the vocoder alone, and the voice bank a checkpoint is evaluated with."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core import audio, contract
from tts_triton.core.config import STREAMING
from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.core.voices import VoiceBank
from tts_triton.serving.pipeline import Pipeline
from tts_triton.text import text_to_sequences


@dataclass
class Clip:
    audio: np.ndarray
    mel: np.ndarray  # decoder output, before the postnet
    alignment: np.ndarray  # [decoder steps, tokens] of the first piece
    hit_max_steps: bool


class RecordingBackend:
    """Wraps an :class:`~tts_triton.serving.pipeline.InferBackend` and keeps the decoder's attention."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.alignments: list[np.ndarray] = []

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = await self.inner.infer(model, inputs)
        if model == contract.DECODER:
            self.alignments.append(out["alignment"][0])
        return out


async def synthesize(backend: RecordingBackend, cfg: Any, text: str, style: np.ndarray) -> Clip:
    """One sentence through the reference synthesizer (:class:`~tts_triton.serving.pipeline.Pipeline`)."""
    sequences = text_to_sequences(text, STREAMING.max_tokens)
    pipeline = Pipeline(backend, cfg, STREAMING)
    backend.alignments.clear()
    samples, mel = await pipeline.synthesize(sequences, style)
    first = pipeline.stats[0]
    alignment = np.concatenate(backend.alignments[: first.decoder_calls])[: first.steps, : len(sequences[0])]
    return Clip(samples, mel, alignment, any(s.hit_max_steps for s in pipeline.stats))


def copy_synthesis(vocode: Any, samples: np.ndarray) -> np.ndarray:
    """``samples`` -> log-mel -> ``vocode`` (``[1, frames, n_mels] -> [1, samples]``, e.g.
    ``VocoderStage.vocode``: no acoustic model, no postnet)."""
    import torch  # the model extra: an optional heavy dependency, kept out of the spawned feature workers

    with torch.inference_mode():
        return vocode(torch.from_numpy(audio.mel_spectrogram(samples))[None]).reshape(-1).numpy()


def voice_bank_for(checkpoint: Path | None, explicit: Path | None, ckpt: Any,
                   voices: Sequence[str] = ()) -> tuple[Any, str]:
    """The voice bank: ``explicit``, else ``voice_bank.json`` beside the checkpoint file, else built from the
    teachers' reference clips (:func:`~tts_triton.export.voice_bank.teacher_references`) for the voices the
    checkpoint learned and ``voices`` (more names of ``prosody.CORPUS_VOICES``)."""
    # torch (the model extra): an optional heavy dependency, kept out of the spawned feature workers.
    from tts_triton.export.voice_bank import build_voice_bank, teacher_references
    from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT

    if explicit:
        return VoiceBank.load(explicit), str(explicit)
    path = checkpoint or (DEFAULT_CHECKPOINT if DEFAULT_CHECKPOINT.exists() else None)
    if path and path.with_name(VOICE_BANK_FILE).exists():
        return VoiceBank.load(path.with_name(VOICE_BANK_FILE)), _relative(path.with_name(VOICE_BANK_FILE))
    names = list(dict.fromkeys([*ckpt.voices, *voices]))
    print("building the voice bank from the teachers' reference clips ...", file=sys.stderr, flush=True)
    return (build_voice_bank(ckpt, teacher_references(voices=names)),
            "built from the teachers' reference clips (export.voice_bank)")


def _relative(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
