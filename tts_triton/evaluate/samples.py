"""Listening samples for the docs: one checkpoint's default voice saying a few held-out sentences in a few emotions.

    python -m tts_triton.evaluate.samples --label before [--checkpoint PATH] [--voice-bank BANK] [--voice V] \
        [--sentences 2] [--emotions neutral,happy,sad] [--out docs/samples]

Run it once with ``--label before`` on the shipped checkpoint and once with ``--label after`` on the new one
(before shipping it, or after with ``--checkpoint`` on the old file): each writes ``LABEL-VOICE-EMOTION-K.wav``
(16-bit mono, 22.05 kHz; K is the held-out sentence's index in :mod:`~tts_triton.evaluate.heldout`, not the
training generator's) and ``LABEL.md``, the index of those files, into ``--out``, replacing that label's earlier
files. The voice is the bank's default unless ``--voice`` names another; the bank is found as the evaluation
finds it (:func:`~tts_triton.evaluate.synthesis.voice_bank_for`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tts_triton.core import audio
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES

DEFAULT_OUT = Path("docs/samples")
DEFAULT_EMOTIONS = ("neutral", "happy", "sad")
DEFAULT_SENTENCES = 2


@dataclass(frozen=True)
class Sample:
    """One written file: its name in the folder, what it says and how long it is."""

    file: str
    voice: str
    emotion: str
    sentence: int
    text: str
    seconds: float
    hit_max_steps: bool


def write_samples(ckpt: Any, bank: Any, voice: str, emotions: Sequence[str], sentences: int, label: str,
                  out: Path) -> list[Sample]:
    """Synthesize the first ``sentences`` held-out sentences in each of ``emotions`` with ``bank``'s presets of
    ``voice`` (in process, as the evaluation does) and write them as ``LABEL-VOICE-EMOTION-K.wav`` into ``out``,
    after removing ``label``'s earlier WAVs there. An unknown voice or emotion raises InvalidInput first."""
    from tts_triton.evaluate.synthesis import RecordingBackend, synthesize
    from tts_triton.serving.voice import Voice

    if not 1 <= sentences <= len(HELDOUT_SENTENCES):
        raise ValueError(f"sentences must be in 1..{len(HELDOUT_SENTENCES)}")
    styles = {e: bank.style(voice, e) for e in emotions}
    backend = RecordingBackend(Voice(ckpt).backend)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{label}-*.wav"):
        old.unlink()
    written = []
    for k, text in enumerate(HELDOUT_SENTENCES[:sentences]):
        for emotion in emotions:
            clip = asyncio.run(synthesize(backend, ckpt.config, text, styles[emotion]))
            name = f"{label}-{voice}-{emotion}-{k:02d}.wav"
            audio.save_wav(out / name, clip.audio, audio.SAMPLE_RATE)
            written.append(Sample(name, voice, emotion, k, text, len(clip.audio) / audio.SAMPLE_RATE,
                                  clip.hit_max_steps))
    return written


def index(samples: Sequence[Sample], label: str, checkpoint: str, bank_source: str, command: str) -> str:
    """``LABEL.md``: where the samples came from and one row per file."""
    lines = [f"# Samples: {label}", "", f"Checkpoint {checkpoint}, voice bank {bank_source}; written by", "",
             f"    {command}", "", "| file | voice | emotion | s | text |", "|---|---|---|---|---|"]
    lines += [f"| [{s.file}]({s.file}) | {s.voice} | {s.emotion} | {s.seconds:.1f}"
              f"{' (hit max steps)' if s.hit_max_steps else ''} | {s.text} |" for s in samples]
    return "\n".join([*lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    import shlex

    from tts_triton.errors import InvalidInput
    from tts_triton.evaluate.synthesis import voice_bank_for
    from tts_triton.models.checkpoint import UNTRAINED_LABEL, fingerprint, resolve  # torch (the model extra)

    parser = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.samples", description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="file prefix, e.g. before or after")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--voice-bank", type=Path, help="voice bank JSON (default: voice_bank.json beside the "
                                                        "checkpoint, else built)")
    parser.add_argument("--voice", help="the voice (default: the bank's default voice)")
    parser.add_argument("--emotions", default=",".join(DEFAULT_EMOTIONS), help="comma-separated emotions")
    parser.add_argument("--sentences", type=int, default=DEFAULT_SENTENCES,
                        help=f"held-out sentences (at most {len(HELDOUT_SENTENCES)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.label.replace("-", "").replace("_", "").isalnum():
        parser.error("--label: letters, digits, '-' and '_' only")
    ckpt = resolve(args.checkpoint)
    if not ckpt.trained:
        print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
    bank, source = voice_bank_for(args.checkpoint, args.voice_bank, ckpt, [args.voice] if args.voice else [])
    voice = args.voice or bank.default_voice
    try:
        samples = write_samples(ckpt, bank, voice, args.emotions.split(","), args.sentences, args.label, args.out)
    except (InvalidInput, ValueError) as exc:
        parser.error(str(exc))
    command = shlex.join(["python", "-m", "tts_triton.evaluate.samples", *(sys.argv[1:] if argv is None else argv)])
    (args.out / f"{args.label}.md").write_text(index(samples, args.label, f"{ckpt.name} `{fingerprint(ckpt)[:16]}`",
                                                     source, command))
    print(f"{len(samples)} samples of {voice} -> {args.out}/{args.label}-*.wav, index {args.out}/{args.label}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
