"""Make a trained checkpoint the default voice (``tts_triton/assets/default_voice.pt``, fp16) with its
voice bank (``voice_bank.json`` beside it) built from held-out clips::

    python -m tts_triton.export.release ship --checkpoint voice.pt [--metrics results.json] [--out PATH]

The bank holds every voice the checkpoint learned (:attr:`~tts_triton.models.checkpoint.Checkpoint.voices`: slt's
presets from flite's renderings, the others' from espeak-ng's), and its default voice is the first of
:data:`~tts_triton.export.voice_bank.DEFAULT_VOICES` the checkpoint learned: shipping a checkpoint that learned
the natural voice makes it the default, which serving, the gateway and the clients then read from the bank.
``--out`` elsewhere writes the same pair outside the package, to evaluate what would ship before shipping it.

It sits above training and export: it takes a checkpoint the trainers wrote (merged with
``python -m tts_triton.training.merge``) and the voice bank builder of :mod:`tts_triton.export`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.core.voices import VoiceBank
from tts_triton.export.voice_bank import (
    build_voice_bank,
    teacher_references,
    validation_texts,
    variant_references,
    voice_names,
)
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint
from tts_triton.training.runs import command_line

MODULE = "tts_triton.export.release"


def ship(ckpt: Checkpoint, out: Path, clips_per_preset: int, metrics: dict[str, Any] | None,
         command: str, voices: Sequence[str] | None = None, default_voice: str | None = None) -> Path:
    """Write ``ckpt`` as the default voice ``out`` (fp16, ``name`` default) and ``voice_bank.json`` beside it.

    The bank holds ``voices`` (default: the ones the checkpoint learned); ``default_voice`` None follows
    :func:`~tts_triton.export.voice_bank.choose_default_voice`. ``metrics`` (an evaluation of these weights; any
    earlier one is dropped) and ``command`` go into ``info``. Returns the voice bank's path.
    """
    if not ckpt.trained:
        raise ValueError("refusing to ship a checkpoint that is not trained (info lacks acoustic or vocoder steps)")
    voices = list(ckpt.voices if voices is None else voices)
    if default_voice is not None and default_voice not in voices:
        raise ValueError(f"default voice {default_voice!r} is not among the bank's voices {', '.join(voices)}")
    texts = validation_texts(clips_per_preset)
    bank = build_voice_bank(ckpt, teacher_references(texts, voices), default_voice,
                            variants=variant_references(texts, voices))
    bank.info["references"] = f"{clips_per_preset} validation sentences of the corpus generator per preset"
    info = {**ckpt.info, "name": "default", "commands": [*ckpt.info.get("commands", []), command]}
    info.pop("metrics", None)  # an earlier evaluation measured other weights
    if metrics is not None:
        info["metrics"] = metrics
    Checkpoint(ckpt.config, ckpt.acoustic, ckpt.generator, True, info).save(out, half=True)
    bank_path = out.with_name(VOICE_BANK_FILE)
    bank.save(bank_path)
    return bank_path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("ship", help="make a trained checkpoint the default voice, with its voice bank")
    s.add_argument("--checkpoint", type=Path, required=True)
    s.add_argument("--out", type=Path, default=DEFAULT_CHECKPOINT,
                   help="the checkpoint to write, its voice bank beside it (default: the package's default voice)")
    s.add_argument("--clips", type=int, default=8, help="held-out reference clips per voice x emotion")
    s.add_argument("--metrics", type=Path, help="JSON of evaluation results to keep in info['metrics']")
    s.add_argument("--voices", help="comma-separated corpus voices of the bank, or 'all' (default: the voices the "
                                    "checkpoint learned)")
    s.add_argument("--default-voice", help="the bank's default voice (default: the first of export.voice_bank."
                                           "DEFAULT_VOICES the checkpoint learned)")
    args = parser.parse_args(argv)
    try:
        voices = voice_names(args.voices)
    except ValueError as exc:
        parser.error(f"--voices: {exc}")
    metrics = json.loads(args.metrics.read_text()) if args.metrics else None
    try:
        bank = ship(load_checkpoint(args.checkpoint), args.out, args.clips, metrics,
                    command_line(MODULE, sys.argv[1:] if argv is None else argv), voices, args.default_voice)
    except ValueError as exc:
        parser.error(str(exc))
    shipped = VoiceBank.load(bank)
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB) and {bank}: voices "
          f"{', '.join(shipped.voices)}, default voice {shipped.default_voice}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
