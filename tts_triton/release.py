"""Make a trained checkpoint the default voice (``tts_triton/assets/default_voice.pt``, fp16) with its
voice bank (``voice_bank.json`` beside it) built from held-out clips::

    python -m tts_triton.release ship --checkpoint voice.pt [--metrics results.json]

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

import numpy as np

from tts_triton.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint
from tts_triton.export.voice_bank import build_voice_bank, teacher_references, validation_texts
from tts_triton.layout import VOICE_BANK_FILE
from tts_triton.training.runs import command_line

MODULE = "tts_triton.release"


def heldout_references(count: int) -> dict[tuple[str, str], list[np.ndarray]]:
    """Reference clips for every voice x emotion of ``prosody.VOICES``: the first ``count`` validation sentences
    of the corpus generator (never trained on; the evaluation uses test sentences), rendered by the teacher."""
    return teacher_references(validation_texts(count))


def ship(ckpt: Checkpoint, out: Path, clips_per_preset: int, metrics: dict[str, Any] | None,
         command: str) -> Path:
    """Write ``ckpt`` as the default voice ``out`` (fp16, ``name`` default) and ``voice_bank.json`` beside it.

    ``metrics`` (an evaluation of these weights; any earlier one is dropped) and ``command`` go into ``info``.
    Returns the voice bank's path.
    """
    if not ckpt.trained:
        raise ValueError("refusing to ship a checkpoint that is not trained (info lacks acoustic or vocoder steps)")
    bank = build_voice_bank(ckpt, heldout_references(clips_per_preset))
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
    s.add_argument("--out", type=Path, default=DEFAULT_CHECKPOINT)
    s.add_argument("--clips", type=int, default=8, help="held-out reference clips per voice x emotion")
    s.add_argument("--metrics", type=Path, help="JSON of evaluation results to keep in info['metrics']")
    args = parser.parse_args(argv)
    metrics = json.loads(args.metrics.read_text()) if args.metrics else None
    bank = ship(load_checkpoint(args.checkpoint), args.out, args.clips, metrics,
                command_line(MODULE, sys.argv[1:] if argv is None else argv))
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB) and {bank}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
