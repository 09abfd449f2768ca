"""Build a voice bank: one style vector per (voice, emotion) preset, from reference clips.

Each preset's vector is the mean style-encoder output over its clips. By default the clips are
rendered with espeak-ng from :mod:`tts_triton.data.prosody` (the voices and emotions the default
voice was trained on) for a few fixed sentences that are not in the training corpus.

    python -m tts_triton.export.voice_bank --out voice_bank.json [--checkpoint ckpt.pt]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from tts_triton import audio, contract
from tts_triton.checkpoint import UNTRAINED_LABEL, Checkpoint, resolve
from tts_triton.voices import VoiceBank, from_styles

#: Sentences of the reference clips (written for this purpose; not produced by the corpus generator).
REFERENCE_TEXTS = (
    "The museum opens its doors at nine, and the guides arrive a little earlier.",
    "Would you carry these letters to the station before the evening train?",
    "What a wonderful surprise to find the garden full of flowers!",
)
DEFAULT_VOICE = "f1"
DEFAULT_EMOTION = "neutral"


def espeak_references(texts: Iterable[str] = REFERENCE_TEXTS) -> dict[tuple[str, str], list[np.ndarray]]:
    """Reference clips for every voice x emotion of the corpus, rendered with espeak-ng."""
    from tts_triton.data import prosody

    texts = list(texts)
    return {(v.name, e.name): [prosody.render(t, v, e) for t in texts]
            for v in prosody.VOICES.values() for e in prosody.EMOTIONS.values()}


def build_voice_bank(ckpt: Checkpoint, clips: dict[tuple[str, str], list[np.ndarray]],
                     default_voice: str = DEFAULT_VOICE, default_emotion: str = DEFAULT_EMOTION) -> VoiceBank:
    """Mean style vector of each preset's clips (float audio at SAMPLE_RATE)."""
    encoder = ckpt.stages()[contract.STYLE_ENCODER]
    styles = {}
    with torch.inference_mode():
        for key, samples in clips.items():
            vectors = [encoder(torch.from_numpy(audio.mel_spectrogram(x))[None])[0][0].numpy() for x in samples]
            styles[key] = np.mean(vectors, axis=0)
    info = {"checkpoint": ckpt.name, "trained": ckpt.trained, "clips_per_preset": len(next(iter(clips.values())))}
    return from_styles(styles, default_voice, default_emotion, info)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    ckpt = resolve(args.checkpoint)
    if not ckpt.trained:
        print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
    bank = build_voice_bank(ckpt, espeak_references())
    bank.save(args.out)
    print(f"wrote {args.out}: {len(bank.voices)} voices x {len(bank.emotions)} emotions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
