"""The served voice against the in-process one: held-out sentences streamed from a running server and synthesized
here by the reference decode loop with the checkpoint's fp32 networks on the CPU.

Against a running server (``tts-triton serve``; any target) of ``--checkpoint`` (default: the default voice)::

    python scripts/gpu/probe/voice.py [--url localhost:8001] [--sentences 8] [--voice V] [--emotion E]
        [--checkpoint PT] [--voice-bank JSON] [--save CLIPS.npz]

Per sentence: the frames each side decoded (a stop step moved by fp16 rounding shows here), the largest mel
difference over the frames both have, the audio SNR over the samples both have, and the mel's cosine; then the
medians. A CPU target serves fp32 and matches to rounding; a GPU target serves fp16 and its free-running decode
may drift. The bank is ``voice_bank.json`` beside the checkpoint unless ``--voice-bank`` names the served one.
``--save`` keeps the served audio (one array per sentence, in order, at the model's rate) in one file, for the
judges on another host (``scripts/judge_clips.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_triton.client import TTSClient
from tts_triton.core.audio import snr_db
from tts_triton.core.endpoints import DEFAULT_GRPC_URL
from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.core.voices import VoiceBank
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from tts_triton.serving.voice import Voice
from tts_triton.text import text_to_sequences


@dataclass(frozen=True)
class Match:
    """One sentence, served against in-process."""

    served_frames: int
    local_frames: int
    mel_max_diff: float
    mel_cosine: float
    snr_db: float


def compare(served_mel: np.ndarray, served_audio: np.ndarray, local_mel: np.ndarray,
            local_audio: np.ndarray) -> Match:
    """Mel ``[frames, n_mels]`` and audio of both sides, compared over what both have."""
    frames, samples = min(len(served_mel), len(local_mel)), min(len(served_audio), len(local_audio))
    a, b = served_mel[:frames].reshape(-1), local_mel[:frames].reshape(-1)
    return Match(len(served_mel), len(local_mel), float(np.abs(a - b).max()),
                 float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-20)),
                 snr_db(local_audio[:samples], served_audio[:samples]))


def match_lines(url: str, checkpoint: Path, bank_path: Path, count: int, voice: str | None,
                emotion: str | None, save: Path | None = None) -> list[str]:
    """One line per held-out sentence and a line of medians; the served clips into ``save`` (npz) if given."""
    ckpt = load_checkpoint(checkpoint)
    bank = VoiceBank.load(bank_path)
    voice, emotion = voice or bank.default_voice, emotion or bank.default_emotion
    style = bank.style(voice, emotion)
    reference = Voice(ckpt).pipeline()
    lines, matches, clips = [], [], []
    with TTSClient(url, timeout=300) as tts:
        for text in HELDOUT_SENTENCES[:count]:
            served = tts.synthesize(text, voice=voice, emotion=emotion, return_mel=True)
            assert served.mel is not None  # asked for with return_mel
            audio, mel = asyncio.run(reference.synthesize(text_to_sequences(text), style))
            m = compare(served.mel, served.audio, mel, audio)
            matches.append(m)
            clips.append(served.audio)
            lines.append(f"{m.served_frames} / {m.local_frames} frames, mel max diff {m.mel_max_diff:.4f}, cosine "
                         f"{m.mel_cosine:.5f}, SNR {m.snr_db:.1f} dB: {text}")
    if save is not None:
        np.savez_compressed(save, *clips)
    same = sum(m.served_frames == m.local_frames for m in matches)
    lines.append(f"{voice}/{emotion}, {len(matches)} sentences: same length {same}/{len(matches)}, median mel max "
                 f"diff {np.median([m.mel_max_diff for m in matches]):.4f}, median cosine "
                 f"{np.median([m.mel_cosine for m in matches]):.5f}, median SNR "
                 f"{np.median([m.snr_db for m in matches]):.1f} dB")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=DEFAULT_GRPC_URL, help="the server's gRPC address")
    parser.add_argument("--sentences", type=int, default=8, help=f"held-out sentences (at most "
                                                                 f"{len(HELDOUT_SENTENCES)})")
    parser.add_argument("--voice", help="default: the bank's default voice")
    parser.add_argument("--emotion", help="default: the bank's default emotion")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="the checkpoint the server serves")
    parser.add_argument("--voice-bank", type=Path, help=f"the served bank (default: {VOICE_BANK_FILE} beside "
                                                        "the checkpoint)")
    parser.add_argument("--save", type=Path, help="keep the served clips in this .npz file")
    args = parser.parse_args(argv)
    if not 1 <= args.sentences <= len(HELDOUT_SENTENCES):
        parser.error(f"--sentences must be 1..{len(HELDOUT_SENTENCES)}")
    bank = args.voice_bank or args.checkpoint.with_name(VOICE_BANK_FILE)
    for line in match_lines(args.url, args.checkpoint, bank, args.sentences, args.voice, args.emotion, args.save):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
