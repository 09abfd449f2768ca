"""The CMU-lexicon teachers driven with espeak-ng's pronunciations against their own lexicons, on the ASR round trip.

    python -m tts_triton.evaluate.teacher [--voices slt] [--sentences 60] [--jobs 2] [--out FILE.md]

For each voice of :data:`~tts_triton.data.prosody.CORPUS_VOICES` whose neutral teacher is flite or festival (slt's
is festival, kal16's flite), the held-out sentences are rendered in the neutral preset twice: *driven* (the teacher
reads espeak-ng's pronunciations from a lexicon addendum, as the corpus renders them) and *plain* (its own
lexicon). Each rendering is transcribed by PocketSphinx
(:mod:`tts_triton.evaluate.asr`). The report gives each mode's mean WER and its phoneme agreement with the
front end (:func:`tts_triton.data.cmu.agreement`), and the JSON beside it gives every transcript. Driving
a teacher must not make it much less intelligible.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, ESPEAK_NG, NEUTRAL, rendering
from tts_triton.evaluate.asr import transcribe, wer
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.measures import process_pool
from tts_triton.jobs.progress import ProgressLine

MODES = {"driven": True, "plain": False}


def check_one(text: str, voice: str, drive: bool) -> tuple[str, float]:
    """PocketSphinx's transcript of ``voice`` saying ``text`` (neutral) and the rendering's phoneme agreement."""
    from tts_triton.core import audio

    said = rendering(text, CORPUS_VOICES[voice], EMOTIONS[NEUTRAL], drive)
    assert said.agreement is not None  # a CMU-lexicon teacher
    return transcribe(said.audio, audio.SAMPLE_RATE), said.agreement


def measure(voices: Sequence[str], count: int, jobs: int) -> dict:
    """Transcripts, WERs and agreements of ``count`` held-out sentences per voice and mode."""
    sentences = list(HELDOUT_SENTENCES[:count])
    started = time.monotonic()
    with process_pool(jobs) as pool:
        futures = {(v, mode): [pool.submit(check_one, s, v, drive) for s in sentences]
                   for v in voices for mode, drive in MODES.items()}
        progress = ProgressLine("teacher round trip", sum(map(len, futures.values())))
        results: dict[str, dict[str, dict]] = {}
        for (voice, mode), fs in futures.items():
            rows = []
            for f in fs:
                rows.append(f.result())
                progress.advance(detail=f"{voice} {mode}")
            wers = [wer(s, hyp) for s, (hyp, _) in zip(sentences, rows, strict=True)]
            agreement = [a for _, a in rows]
            results.setdefault(voice, {})[mode] = {
                "wer": float(np.mean(wers)), "agreement": float(np.mean(agreement)),
                "exact": float(np.mean([a == 1.0 for a in agreement])), "transcripts": [h for h, _ in rows]}
    return {"sentences": sentences, "seconds": round(time.monotonic() - started, 1), "voices": results}


def markdown(result: dict, command: str) -> str:
    """The report: one row per voice, driven beside plain."""
    n = len(result["sentences"])
    lines = ["# The CMU-lexicon teachers: driven with espeak-ng's pronunciations vs plain", "",
             f"`{command}`: {n} held-out sentences (`tts_triton.evaluate.heldout`), neutral preset, PocketSphinx 5 "
             "at 16 kHz. *Agreement*: the fraction of the front end's phonemes (as CMU phones) that the teacher said; "
             "*exact*: utterances that said all of them. WER differences under ~0.05 are noise.", "",
             "| voice | driven WER | plain WER | driven agreement (exact) | plain agreement (exact) |",
             "|---|---|---|---|---|"]
    for voice, modes in result["voices"].items():
        d, p = modes["driven"], modes["plain"]
        lines.append(f"| {voice} | {d['wer']:.3f} | {p['wer']:.3f} | {d['agreement']:.4f} ({d['exact']:.0%}) | "
                     f"{p['agreement']:.4f} ({p['exact']:.0%}) |")
    lines += ["", f"Run time: {result['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    cmu_voices = [name for name, v in CORPUS_VOICES.items() if v.teacher != ESPEAK_NG]
    parser = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.teacher", description=__doc__.split("\n")[0])
    parser.add_argument("--voices", default=",".join(cmu_voices),
                        help="comma-separated corpus voices taught by flite or festival")
    parser.add_argument("--sentences", type=int, default=60, help=f"at most {len(HELDOUT_SENTENCES)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, help="Markdown report (its JSON beside it); default: stdout only")
    args = parser.parse_args(argv)
    voices = args.voices.split(",")
    if unknown := sorted(set(voices) - set(cmu_voices)):
        parser.error(f"--voices: {unknown} are not corpus voices taught by flite or festival ({', '.join(cmu_voices)})")
    if not 1 <= args.sentences <= len(HELDOUT_SENTENCES):
        parser.error(f"--sentences must be in 1..{len(HELDOUT_SENTENCES)}")
    result = measure(voices, args.sentences, args.jobs)
    text = markdown(result, "python -m tts_triton.evaluate.teacher " + " ".join(sys.argv[1:] if argv is None else argv))
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
