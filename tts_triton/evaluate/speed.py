"""The gateway's ``speed`` range measured: the model's rate control, the gateway's time-stretch, and both.

    python -m tts_triton.evaluate.speed --out docs/eval [--checkpoint PATH] [--voice VOICE] [--sentences 4]

The default voice (neutral) says the first ``--sentences`` held-out sentences, decoded once in process. Each
decoder mel is time-scaled by the model's rate control (:class:`~tts_triton.serving.controls.TimeScaler`) and
vocoded whole; the gateway's WSOLA (:class:`~tts_triton.gateway.stretch.TimeStretch`) then stretches the audio,
fed in 100 ms pieces as a stream is. Each row is one way to reach a speed: ``model`` alone, ``stretch`` alone (at
1 on the model) or both (the gateway's split, :func:`~tts_triton.gateway.stretch.split_speed`). Per row, over all
sentences: the duration times the speed over the 1x duration (1: exact), the median F0 over the 1x one (1: pitch
kept; WORLD harvest), and the word error rate of a PocketSphinx round trip (artefacts that blur speech raise it;
so does speed itself, for the recogniser: compare rows of one speed).

Prints the table (progress on stderr) and writes it, headed by the command line, to ``OUT/speed.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core import audio
from tts_triton.evaluate.asr import transcribe, wer
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.pitch import median_f0
from tts_triton.gateway.stretch import TimeStretch, split_speed
from tts_triton.jobs.tables import markdown_table, write_report
from tts_triton.serving.controls import TimeScaler

REPORT_FILE = "speed.md"
#: (speed, model's share): the gateway's split at each end, and both ways alone where the model can go.
ROWS = ((0.25, None), (0.5, 0.5), (0.5, 1.0), (1.0, 1.0), (2.0, 2.0), (2.0, 1.0), (4.0, None))
#: Samples per piece fed to the time-stretch: a 100 ms chunk, as the gateway gets them.
PIECE = audio.SAMPLE_RATE // 10


def _stretched(samples: np.ndarray, factor: float) -> np.ndarray:
    if factor == 1.0:
        return samples
    stretch = TimeStretch(factor, audio.SAMPLE_RATE)
    parts = [stretch.process(samples[i:i + PIECE]) for i in range(0, len(samples), PIECE)]
    return np.concatenate([*parts, stretch.finish()])


def measure(ckpt: Any, bank: Any, voice: str, sentences: int) -> list[list[str]]:
    """The table's rows (see the module's docstring)."""
    import torch  # the model extra

    from tts_triton.core import contract
    from tts_triton.core.config import STREAMING
    from tts_triton.serving.voice import Voice
    from tts_triton.text import text_to_sequences

    synthesizer = Voice(ckpt)
    pipeline = synthesizer.pipeline()
    vocoder = synthesizer.backend.stages[contract.VOCODER]
    style = bank.style(voice, "neutral")
    texts = HELDOUT_SENTENCES[:sentences]
    mels = [asyncio.run(pipeline.synthesize(text_to_sequences(t, STREAMING.max_tokens), style))[1] for t in texts]

    def render(speed: float, model: float) -> list[np.ndarray]:
        clips = []
        for mel in mels:
            scaled = TimeScaler(model).extend(mel, finished=True)
            with torch.inference_mode():
                (samples,) = vocoder(torch.from_numpy(np.ascontiguousarray(scaled, np.float32))[None])
            clips.append(_stretched(samples[0].numpy(), speed / model))
        return clips

    base = render(1.0, 1.0)
    base_seconds, base_f0 = sum(len(c) for c in base), median_f0(*base)
    rows = []
    for speed, model in ROWS:
        model = split_speed(speed)[0] if model is None else model
        print(f"speed {speed:g}: model {model:g} x stretch {speed / model:g} ...", file=sys.stderr, flush=True)
        clips = render(speed, model)
        errors = [wer(t, transcribe(c, audio.SAMPLE_RATE)) for t, c in zip(texts, clips, strict=True)]
        how = "model" if speed == model else "stretch" if model == 1.0 else "model x stretch"
        rows.append([f"{speed:g}", how, f"{model:g} x {speed / model:g}",
                     f"{sum(len(c) for c in clips) * speed / base_seconds:.3f}", f"{median_f0(*clips) / base_f0:.3f}",
                     f"{np.mean(errors):.2f}"])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from tts_triton.evaluate.synthesis import voice_bank_for
    from tts_triton.models.checkpoint import UNTRAINED_LABEL, fingerprint, resolve  # torch (the model extra)

    parser = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.speed", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help=f"folder for {REPORT_FILE}")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--voice", help="voice of the bank (default: its default voice)")
    parser.add_argument("--sentences", type=int, default=4,
                        help=f"held-out sentences (at most {len(HELDOUT_SENTENCES)})")
    args = parser.parse_args(argv)
    ckpt = resolve(args.checkpoint)
    if not ckpt.trained:
        print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
    bank, source = voice_bank_for(args.checkpoint, None, ckpt)
    voice = args.voice or bank.default_voice
    head = ["speed", "how", "model x stretch", "duration x speed / 1x", "median F0 / 1x", "WER"]
    report = markdown_table(head, measure(ckpt, bank, voice, args.sentences), left=3)
    print(report)
    command = shlex.join(["python", "-m", "tts_triton.evaluate.speed", *(sys.argv[1:] if argv is None else argv)])
    text = ["# The gateway's speed range", "",
            f"Checkpoint {ckpt.name} `{fingerprint(ckpt)[:16]}`, voice bank {source}, voice {voice} (neutral), the "
            f"first {args.sentences} held-out sentences; written by", "", f"    OMP_NUM_THREADS=1 {command}", "",
            __doc__.split("\n\n")[2].replace("\n", " "), "", report, ""]
    write_report(args.out, REPORT_FILE, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
