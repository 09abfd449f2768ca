"""The evaluation's figures (mel spectrograms, attention, F0 per emotion) and its WAV samples."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core import audio
from tts_triton.data.prosody import PITCH_ORDER
from tts_triton.evaluate.measures import FRAME_PERIOD_MS, Item
from tts_triton.evaluate.synthesis import Clip
from tts_triton.jobs.figures import pyplot

__all__ = ["write_plots", "write_samples"]


def write_plots(folder: Path, item: Item, synth: Clip, teacher_audio: np.ndarray, frames_per_step: int,
                f0: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, str]:
    """Mel spectrograms, the attention alignment, and F0 contours (source -> emotion -> Hz per 5 ms) as PNGs.

    Returns figure name -> file name in ``folder``.
    """
    plt = pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    files = {"mel": "mel.png", "alignment": "alignment.png", "f0": "f0_emotions.png"}

    mels = [("the teacher's rendering (log-mel of the audio)", audio.mel_spectrogram(teacher_audio)),
            ("synthesized: decoder output (before the postnet)", synth.mel),
            ("synthesized: log-mel of the vocoded audio", audio.mel_spectrogram(synth.audio))]
    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    for ax, (label, mel) in zip(axes, mels, strict=True):
        ax.imshow(mel.T, origin="lower", aspect="auto", vmin=audio.SILENCE_LOG_MEL, vmax=2.0, cmap="magma",
                  interpolation="nearest")
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("mel bin")
    axes[-1].set_xlabel(f"frame ({audio.HOP_LENGTH / audio.SAMPLE_RATE * 1000:.1f} ms)")
    fig.suptitle(f"{item.sentence_id} {item.voice} {item.emotion}: {item.text}", fontsize=9)
    fig.tight_layout()
    _save(fig, folder / files["mel"])

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.imshow(synth.alignment.T, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xlabel(f"decoder step ({frames_per_step} frames each)")
    ax.set_ylabel("phoneme token")
    ax.set_title(f"attention alignment: {item.sentence_id} {item.voice} {item.emotion}", fontsize=9)
    fig.tight_layout()
    _save(fig, folder / files["alignment"])

    fig, axes = plt.subplots(1, len(f0), figsize=(4 * len(f0), 3.5), sharey=True)
    for ax, (source, contours) in zip(axes, f0.items(), strict=True):
        for emotion in PITCH_ORDER:
            track = np.where(contours[emotion] > 0, contours[emotion], np.nan)
            ax.plot(np.arange(len(track)) * FRAME_PERIOD_MS / 1000.0, track, label=emotion, linewidth=0.8)
        ax.set_title(f"{source}: {item.voice}, {item.sentence_id}", fontsize=9)
        ax.set_xlabel("s")
    axes[0].set_ylabel("F0 (Hz, harvest)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    _save(fig, folder / files["f0"])
    return files


def _save(fig: Any, path: Path) -> None:
    """Write ``fig`` as a 256-colour PNG (a third of the size of matplotlib's RGBA one) and close it."""
    from PIL import Image  # optional heavy dependency (the eval extra: matplotlib's PIL)

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72)
    pyplot().close(fig)
    Image.open(buffer).convert("RGB").quantize(256).save(path, optimize=True)


def write_samples(folder: Path, items: Sequence[Item], synths: Sequence[Clip],
                  count: int = 3) -> list[tuple[str, Item, float]]:
    """The shortest outputs with distinct voices and emotions as 16-bit mono WAVs; returns (file, item, seconds).

    Earlier samples of this naming pattern in ``folder`` are removed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("s[0-9]*-*-*.wav"):
        old.unlink()
    chosen: list[tuple[str, Item, float]] = []
    for index in sorted(range(len(items)), key=lambda k: len(synths[k].audio)):
        item = items[index]
        if len(chosen) < count and all(item.voice != c.voice and item.emotion != c.emotion for _, c, _ in chosen):
            name = f"{item.sentence_id}-{item.voice}-{item.emotion}.wav"
            audio.save_wav(folder / name, synths[index].audio, audio.SAMPLE_RATE)
            chosen.append((name, item, len(synths[index].audio) / audio.SAMPLE_RATE))
    return chosen
