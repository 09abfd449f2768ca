"""The streamed vocoder's seams: a many-chunk stream of the full-size vocoder against one-shot vocoding."""

from __future__ import annotations

import asyncio

import numpy as np
import torch

from tts_triton.core import audio, contract
from tts_triton.core.config import StreamingConfig
from tts_triton.models.checkpoint import Checkpoint
from tts_triton.serving.in_process import TorchBackend
from tts_triton.serving.pipeline import ChunkPlanner, Pipeline


def test_streamed_audio_matches_one_shot_vocoding(tiny_checkpoint: Checkpoint) -> None:
    """The vocoder (full size in any config) on a short sentence: every seam of a many-chunk stream."""
    from tts_triton.data import prosody

    speech = prosody.render("No seams between the chunks.", prosody.VOICES["f1"], prosody.EMOTIONS["neutral"])
    mel = audio.mel_spectrogram(speech)
    stages = tiny_checkpoint.stages()
    pipeline = Pipeline(TorchBackend(stages, tiny_checkpoint.config), tiny_checkpoint.config)
    planner = ChunkPlanner(StreamingConfig(chunk_frames=(8, 16, 32)))  # many seams
    chunks = []
    for available in range(16, len(mel) + 16, 16):  # frames arrive as from K*r-frame decoder calls
        finished = available >= len(mel)
        while (window := planner.next_window(min(available, len(mel)), finished)) is not None:
            chunks.append(asyncio.run(pipeline.vocode(mel, window)))
    assert len(chunks) >= 5
    streamed = np.concatenate(chunks)
    with torch.no_grad():
        (one_shot,) = stages[contract.VOCODER](torch.from_numpy(mel)[None])
    one_shot = one_shot[0].numpy()
    assert streamed.shape == one_shot.shape
    snr = 10 * np.log10(np.sum(one_shot**2) / np.sum((streamed - one_shot) ** 2))
    assert snr >= 30.0, f"seams: SNR {snr:.1f} dB"
