"""Why the mel covers the whole 0-11025 Hz band: what is lost by cutting espeak-ng's voice at 8 kHz.

    .venv/bin/python scripts/mel_band.py [--sentences 4] [--voices m1,m8,f2] [--emotions sad,neutral,surprised]
        [--iterations 64] [--jobs N] [--out docs/records/mel_band.md]

The first ``--sentences`` test sentences are rendered by espeak-ng (:func:`tts_triton.data.prosody.render`)
in every voice x emotion given. Each rendering is compared (MCD-DTW and mean F0, as
:mod:`tts_triton.evaluate` measures them) with:

- the rendering low-passed at 8 kHz (8th-order Butterworth, zero phase): what a vocoder that only
  knows the 0-8 kHz band can give back at best;
- Griffin-Lim reconstructions from a mel of each layout: magnitude mel (``tts_triton.core.audio``'s
  framing, filters and 1e-5 clamp, on a centred STFT), back to a linear magnitude through the
  filterbank's pseudo-inverse (clipped at 0), then ``--iterations`` Griffin-Lim iterations from a
  seeded random phase. Griffin-Lim of the exact STFT magnitude is the floor that Griffin-Lim itself sets.

The F0 error of a clip is ``|mean F0 of the condition - mean F0 of the rendering|`` over voiced frames
(WORLD harvest, 50-800 Hz). A table goes to stdout (and with ``--out`` to a markdown file headed by
the command line); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.signal import butter, istft, sosfiltfilt, stft

from tts_triton.core import audio
from tts_triton.data.prosody import EMOTIONS, VOICES, render
from tts_triton.evaluate import measures

LOWPASS_HZ = 8000.0
LOWPASS_ORDER = 8
SEED = 0

#: Mel layouts (bins, upper edge in Hz) that Griffin-Lim starts from; the last one is tts_triton.core.audio's.
LAYOUTS: tuple[tuple[int, float], ...] = ((80, 8000.0), (80, audio.FMAX), (audio.N_MELS, audio.FMAX))


@dataclass(frozen=True)
class Condition:
    """A row of the table: ``layout`` None with ``lowpass`` is the low-passed rendering, None without
    it Griffin-Lim of the exact STFT magnitude."""

    label: str
    layout: tuple[int, float] | None = None
    lowpass: bool = False


def conditions() -> list[Condition]:
    rows = [Condition(f"rendering low-passed at {LOWPASS_HZ / 1000:g} kHz", lowpass=True)]
    for n_mels, fmax in LAYOUTS:
        current = " (tts_triton.core.audio)" if (n_mels, fmax) == (audio.N_MELS, audio.FMAX) else ""
        rows.append(Condition(f"Griffin-Lim from {n_mels} mel bins to {fmax / 1000:g} kHz{current}", (n_mels, fmax)))
    rows.append(Condition("Griffin-Lim from the exact STFT magnitude (its own floor)"))
    return rows


def _stft(x: np.ndarray) -> np.ndarray:
    """Centred STFT ``[bins, frames]`` with ``tts_triton.core.audio``'s window and hop, on its magnitude scale."""
    _, _, z = stft(x, audio.SAMPLE_RATE, "hann", audio.WIN_LENGTH, audio.WIN_LENGTH - audio.HOP_LENGTH, audio.N_FFT)
    return z * (audio.WIN_LENGTH / 2)  # scipy divides by the window's sum (periodic Hann: N / 2); rfft does not


def _istft(z: np.ndarray, length: int) -> np.ndarray:
    _, x = istft(z / (audio.WIN_LENGTH / 2), audio.SAMPLE_RATE, "hann", audio.WIN_LENGTH,
                 audio.WIN_LENGTH - audio.HOP_LENGTH, audio.N_FFT)
    return np.pad(x, (0, max(0, length - len(x))))[:length]


def linear_from_log_mel(log_mel: np.ndarray, layout: tuple[int, float] = (audio.N_MELS, audio.FMAX)) -> np.ndarray:
    """A log-mel ``[n_mels, frames]`` of ``layout`` back to a linear magnitude ``[bins, frames]`` through the
    filterbank's pseudo-inverse, clipped at 0."""
    basis = audio.mel_filterbank(n_mels=layout[0], fmax=layout[1]).astype(np.float64)
    return np.maximum(np.linalg.pinv(basis) @ np.exp(np.asarray(log_mel, np.float64)), 0.0)


def mel_magnitude(magnitude: np.ndarray, layout: tuple[int, float]) -> np.ndarray:
    """The linear magnitude ``[bins, frames]`` that a log-mel of ``layout`` keeps of ``magnitude``."""
    basis = audio.mel_filterbank(n_mels=layout[0], fmax=layout[1]).astype(np.float64)
    return linear_from_log_mel(np.log(np.maximum(basis @ magnitude, audio.LOG_CLAMP)), layout)  # what nets see


def griffin_lim(magnitude: np.ndarray, length: int, iterations: int, seed: int = SEED) -> np.ndarray:
    """Audio of ``length`` samples whose STFT magnitude approaches ``magnitude`` (Griffin & Lim, 1984)."""
    phase = np.exp(2j * np.pi * np.random.default_rng(seed).random(magnitude.shape))
    for _ in range(iterations):
        phase = np.exp(1j * np.angle(_stft(_istft(magnitude * phase, length))))
    return _istft(magnitude * phase, length).astype(np.float32)


def lowpass(x: np.ndarray, cutoff: float = LOWPASS_HZ) -> np.ndarray:
    sos = butter(LOWPASS_ORDER, cutoff, fs=audio.SAMPLE_RATE, output="sos")
    return np.ascontiguousarray(sosfiltfilt(sos, np.asarray(x, np.float64)), dtype=np.float32)


def measure_clip(text: str, voice: str, emotion: str, iterations: int) -> list[tuple[float, float]]:
    """(MCD dB, |mean F0 error| Hz) of every :func:`conditions` row for one rendering."""
    x = render(text, VOICES[voice], EMOTIONS[emotion])
    reference = measures.features(np.ascontiguousarray(x, np.float64))
    f0_ref = measures.mean_f0([reference.f0])
    magnitude = np.abs(_stft(x.astype(np.float64)))
    results = []
    for condition in conditions():
        if condition.lowpass:
            y = lowpass(x)
        elif condition.layout is None:
            y = griffin_lim(magnitude, len(x), iterations)
        else:
            y = griffin_lim(mel_magnitude(magnitude, condition.layout), len(x), iterations)
        feats = measures.features(np.ascontiguousarray(y, np.float64))
        results.append((measures.mcd(feats.speech, reference.speech), abs(measures.mean_f0([feats.f0]) - f0_ref)))
    return results


def _fmt(values: Sequence[float], digits: int = 1) -> str:
    return f"{np.nanmedian(values):.{digits}f}"


def tables(clips: Sequence[tuple[str, str]], results: Sequence[list[tuple[float, float]]]) -> str:
    """The summary table and the per voice x emotion table, in markdown."""
    rows = conditions()
    mcds = np.array([[r[0] for r in clip] for clip in results])  # [clips, conditions]
    f0s = np.array([[r[1] for r in clip] for clip in results])
    lines = ["| condition | median MCD-DTW (dB) | MCD range (dB) | mean abs F0 error (Hz) | max abs F0 error (Hz) |",
             "|---|---|---|---|---|"]
    for i, row in enumerate(rows):
        lines.append(f"| {row.label} | {np.median(mcds[:, i]):.2f} | {mcds[:, i].min():.2f}-{mcds[:, i].max():.2f} | "
                     f"{np.nanmean(f0s[:, i]):.1f} | {np.nanmax(f0s[:, i]):.1f} |")
    lines += ["", "Per voice and emotion, median over the sentences: MCD-DTW dB / abs F0 error Hz.", ""]
    short = ["low-pass", *(f"GL {n}@{f / 1000:g}k" for n, f in LAYOUTS), "GL exact"]
    lines += ["| voice | emotion | " + " | ".join(short) + " |", "|---|---|" + "---|" * len(short)]
    for key in dict.fromkeys(clips):
        picked = [k for k, clip in enumerate(clips) if clip == key]
        cells = [f"{_fmt(mcds[picked, i], 2)} / {_fmt(f0s[picked, i])}" for i in range(len(rows))]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _names(value: str, known: dict[str, object], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown}; choose from {sorted(known)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="scripts/mel_band.py", description=__doc__.split("\n")[0])
    p.add_argument("--sentences", type=int, default=4, help="first N test sentences of the corpus")
    p.add_argument("--voices", type=lambda v: _names(v, VOICES, "voices"), default=["m1", "m8", "f2"])
    p.add_argument("--emotions", type=lambda v: _names(v, EMOTIONS, "emotions"),
                   default=["sad", "neutral", "surprised"])
    p.add_argument("--iterations", type=int, default=64, help="Griffin-Lim iterations")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    args = p.parse_args(argv)

    texts = [item.text for item in measures.select_items(args.sentences)]
    jobs = [(text, voice, emotion) for voice, emotion, text in itertools.product(args.voices, args.emotions, texts)]
    print(f"{len(jobs)} renderings x {len(conditions())} conditions on {args.jobs} processes", file=sys.stderr)
    with measures.process_pool(args.jobs) as pool:
        results = measures.run_parallel(pool, "clips", measure_clip, [(*job, args.iterations) for job in jobs])
    body = tables([(voice, emotion) for _, voice, emotion in jobs], results)
    print(body, end="")
    if args.out:
        command = shlex.join([".venv/bin/python", "scripts/mel_band.py", *argv])
        header = (f"# What the mel band keeps of espeak-ng's voice\n\n    {command}\n\n"
                  f"{len(texts)} test sentences x voices {', '.join(args.voices)} x emotions "
                  f"{', '.join(args.emotions)}; Griffin-Lim: {args.iterations} iterations from a seeded random phase. "
                  "MCD-DTW and F0 (WORLD harvest) as `tts_triton.evaluate` measures them, against the unprocessed "
                  "rendering; the F0 error of a clip is the difference of the mean F0 over voiced frames. See "
                  "the docstring of `scripts/mel_band.py` for the method.\n\n")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(header + body)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
