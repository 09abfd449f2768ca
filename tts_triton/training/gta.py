"""Ground-truth-aligned (GTA) mels: a corpus whose mels are the acoustic model's teacher-forced predictions.

    python -m tts_triton.training.gta --data CORPUS --out GTA_CORPUS [--checkpoint CKPT] [--splits train val]
        [--voices slt]

Teacher forcing keeps every predicted frame aligned with the recorded audio, so the vocoder can be
fine-tuned on what the acoustic model really produces (smoothed harmonics, small spectral errors)
against the true waveform: ``train_vocoder --data GTA_CORPUS --init CKPT``. This is HiFi-GAN's own
recipe for pairing it with Tacotron 2.

The new corpus shares the audio shards (symbolic links) and the manifest; its mel shards hold, for the
utterances of ``--splits`` (and of ``--voices``, when given), the postnet output of the checkpoint's acoustic
model in eval mode, styled by another utterance of the same voice and emotion (as in training), and the original
mels elsewhere.
``dataset.json`` records the checkpoint's fingerprint under ``gta``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from tts_triton.data.corpus import MANIFEST, SUMMARY, audio_shard_name, mel_shard_name
from tts_triton.data.dataset import AcousticDataset, Corpus
from tts_triton.models.checkpoint import Checkpoint, fingerprint, resolve
from tts_triton.training.devices import pick_device
from tts_triton.training.logs import StepProgress
from tts_triton.training.schedule import Budget
from tts_triton.training.train_acoustic import epoch_loader, teacher_forced, to_device

MODULE = "tts_triton.training.gta"


@torch.no_grad()
def write_gta(data: Path, ckpt: Checkpoint, out: Path, splits: Sequence[str], batch_size: int = 32,
              device: torch.device | None = None, seed: int = 1234, voices: Sequence[str] | None = None) -> int:
    """Write the GTA corpus of ``data`` to ``out`` (see the module docstring), predicting only the utterances of
    ``voices`` when given; returns utterances predicted."""
    device = device or torch.device("cpu")
    torch.manual_seed(seed)  # the reference crops
    corpus = Corpus(data)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(corpus.root / MANIFEST, out / MANIFEST)
    shards = sorted({e.shard for e in corpus.entries})
    for shard in shards:
        link = out / audio_shard_name(shard)
        link.unlink(missing_ok=True)
        link.symlink_to((corpus.root / audio_shard_name(shard)).resolve())
    mels = {shard: np.load(corpus.root / mel_shard_name(shard)) for shard in shards}  # writable copies
    model = ckpt.acoustic.to(device).eval()
    r = ckpt.config.decoder.frames_per_step
    by_id = {e.id: e for e in corpus.entries}
    done = 0
    for split in splits:
        dataset = AcousticDataset(corpus, split, seed=seed, voices=voices)
        progress = StepProgress(f"gta {split}", Budget(None), 0, len(dataset))
        count = 0
        for batch in epoch_loader(dataset, batch_size, r, seed, 0, 0):
            predicted = teacher_forced(model, to_device(batch, device)).mel_post.float().cpu().numpy()
            for row, utterance in enumerate(batch["id"]):
                e = by_id[utterance]
                mels[e.shard][e.mel_offset : e.mel_offset + e.n_frames] = predicted[row, : e.n_frames]
            count += len(batch["id"])
            progress.update(count, {})
        done += count
    for shard, mel in mels.items():
        np.save(out / mel_shard_name(shard), mel)
    summary = {**corpus.summary, "gta": {"checkpoint": fingerprint(ckpt)[:16], "splits": list(splits),
                                         "voices": list(voices) if voices is not None else None}}
    (out / SUMMARY).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return done


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="corpus directory (tts_triton.data.corpus build)")
    p.add_argument("--out", type=Path, required=True, help="GTA corpus directory (created)")
    p.add_argument("--checkpoint", type=Path, help="default: the shipped default voice")
    p.add_argument("--splits", nargs="+", default=["train", "val"])
    p.add_argument("--voices", nargs="+", help="predict only these voices' utterances (default: every voice); the "
                                               "others keep their mels, e.g. a natural voice's beside synthetic ones")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device")
    args = p.parse_args(argv)
    n = write_gta(args.data, resolve(args.checkpoint), args.out, args.splits, args.batch_size, pick_device(args.device),
                  voices=args.voices)
    print(f"wrote {args.out}: {n} utterances with teacher-forced mels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
