"""The outside judges on clips served elsewhere: DistillMOS, DNSMOS, Whisper tiny.en and PocketSphinx WER of the
held-out sentences saved by ``scripts/gpu/probe/voice.py --save`` (a GPU host has no judges), optionally paired by
sentence against a ``tts_triton.evaluate.naturalness`` JSON's system.

    python scripts/judge_clips.py CLIPS.npz [--against NATURALNESS.json --label 'model slt (served: mel match on)']
        [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tts_triton.core import audio
from tts_triton.evaluate.asr import hear
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.measures import process_pool, standard_error
from tts_triton.evaluate.naturalness import summary
from tts_triton.jobs.progress import ProgressLine


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("clips", type=Path, help="an .npz of the held-out sentences' audio, in order, at the model's rate")
    p.add_argument("--against", type=Path, help="a naturalness JSON to pair with, sentence by sentence")
    p.add_argument("--label", default="model slt (served: mel match on)", help="its system to pair with")
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args(argv)
    with np.load(args.clips) as saved:
        clips = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    sentences = HELDOUT_SENTENCES[: len(clips)]
    progress = ProgressLine("judging", len(clips))
    with process_pool(args.jobs) as pool:
        futures = [pool.submit(hear, c.astype(np.float32), audio.SAMPLE_RATE, False, None, True) for c in clips]
        heard = []
        for f in futures:
            heard.append(f.result())
            progress.advance()
    judged = summary(sentences, heard)
    print(f"{len(clips)} clips: DistillMOS {judged['distillmos']:.2f} ± {judged['distillmos_se']:.2f}, DNSMOS OVRL "
          f"{judged['dnsmos_ovrl']:.2f} / BAK {judged['dnsmos_bak']:.2f}, Whisper tiny.en WER "
          f"{judged['whisper_wer']:.3f}, PocketSphinx WER {judged['pocketsphinx_wer']:.3f}")
    if args.against:
        other = np.array([c["distillmos"] for c in json.loads(args.against.read_text())["clips"][args.label]])
        mos = np.array([h.mos for h in heard])
        d = mos - other[: len(mos)]
        print(f"against {args.against} '{args.label}' ({other[: len(mos)].mean():.2f}): {d.mean():+.2f} ± "
              f"{standard_error(d):.2f} paired, higher on {(d > 0).sum()} of {len(d)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
