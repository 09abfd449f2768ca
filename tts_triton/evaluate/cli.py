"""``python -m tts_triton.evaluate``: evaluate a checkpoint and write the report (see :mod:`tts_triton.evaluate`)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from tts_triton import evaluate as package
from tts_triton.evaluate.report import report, results_json
from tts_triton.evaluate.run import DEFAULT_OUT, MIN_SENTENCES, default_cache, evaluate

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate a checkpoint and write the report; exit 0 even when goals are missed."""
    parser = argparse.ArgumentParser(prog="python -m tts_triton.evaluate",
                                     description=(package.__doc__ or "").split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--voice-bank", type=Path,
                        help="voice bank JSON (default: voice_bank.json beside the checkpoint, else built)")
    parser.add_argument("--sentences", type=int, default=MIN_SENTENCES, help="test sentences to synthesize")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the report; eval/ and samples/ go beside it")
    parser.add_argument("--cache", type=Path,
                        help="cache of espeak-ng features (default: eval-features in the cache folder)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for features and DTW")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "tts_triton.evaluate", *(sys.argv[1:] if argv is None else argv)])
    args.cache = args.cache or default_cache()
    ev = evaluate(args, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(ev))
    (args.out.parent / "eval" / "results.json").write_text(json.dumps(results_json(ev), indent=1))
    print(f"median MCD {ev.median_mcd:.2f} dB, voice identity {ev.identity_pct:.0f} %, stop failures "
          f"{ev.stop_failures}/{len(ev.utterances)}, emotion order {ev.emotion_pct:.0f} % of voices -> {args.out}")
    return 0
