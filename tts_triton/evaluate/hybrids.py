"""What of the vocoder's sound the naturalness judge hears: the teacher's audio and the vocoder's copy synthesis
of it, mixed part by part, through DistillMOS.

    python -m tts_triton.evaluate.hybrids [--checkpoint CKPT] [--voice slt] [--sentences 30] [--jobs 2]
        [--out docs/records/eval/hybrids.md]

For each held-out sentence, ``x`` is the voice's teacher rendering (neutral, as the corpus renders it) and ``y`` the
checkpoint's vocoder alone on its log-mel (generator and mel match, as :mod:`~tts_triton.evaluate.naturalness`'s
"vocoder alone + mel match"). The two are aligned by construction (mel frame k is samples ``[k * hop, (k + 1) *
hop)`` on both sides; their energy envelopes agree at lag 0), so no shift is searched: a waveform correlation would
lock onto a pitch period instead. Through one STFT (:data:`N_FFT`, :data:`HOP`) each hybrid takes one part from
``y`` and the rest from ``x``:

- **spectrum or phase**: ``y``'s magnitude with ``x``'s phase, and ``x``'s magnitude with ``y``'s phase;
- **bands**: ``x`` with ``y``'s bins in one band (:data:`BANDS`, up to 8 kHz, where the judge's 16 kHz input ends),
  and ``y`` with ``x``'s bins in the same band.

Both ends pass through the same STFT and back, as controls. A part whose hybrid falls as far as ``y`` carries the
loss; one whose hybrid stays at ``x`` does not. The report gives each system's mean DistillMOS (± standard error)
and its paired difference from the teacher, then ``y``'s phase distances from ``x`` (:func:`phase`); the JSON
beside it every score.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from tts_triton.core import audio
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES, add_judged_run_options
from tts_triton.evaluate.measures import process_pool, standard_error
from tts_triton.jobs.progress import ProgressLine
from tts_triton.jobs.tables import markdown_table

#: The hybrids' STFT: the vocoder's own framing (1024 points with a hop of 256 at 22,050 Hz: 46 ms, 12 ms).
N_FFT, HOP = audio.N_FFT, audio.HOP_LENGTH
#: The band where the fundamental and the first harmonics are, of the phase distances' second column.
LOW_HZ = 1000
#: Bands in Hz, to the judge's Nyquist frequency: the fundamental and first formant, the second, the third and up,
#: and the fricatives' band.
BANDS = ((0, 1000), (1000, 2500), (2500, 5000), (5000, 8000))


def hybrids(x: np.ndarray, y: np.ndarray, rate: int) -> dict[str, np.ndarray]:
    """Every hybrid of teacher ``x`` and copy synthesis ``y`` (same length and rate), keyed by its label, the two
    controls first."""
    import torch

    window = torch.hann_window(N_FFT, dtype=torch.float64)

    def stft(a: np.ndarray) -> torch.Tensor:
        return torch.stft(torch.from_numpy(a.astype(np.float64)), N_FFT, HOP, window=window, return_complex=True)

    def istft(spec: torch.Tensor) -> np.ndarray:
        return torch.istft(spec, N_FFT, HOP, window=window, length=len(x)).numpy().astype(np.float32)

    sx, sy = stft(x), stft(y)
    freqs = torch.fft.rfftfreq(N_FFT, 1.0 / rate)[:, None]
    out = {"teacher (through the STFT)": istft(sx), "copy synthesis (through the STFT)": istft(sy),
           "copy synthesis's spectrum, teacher's phase": istft(sy.abs() * torch.exp(1j * sx.angle())),
           "teacher's spectrum, copy synthesis's phase": istft(sx.abs() * torch.exp(1j * sy.angle()))}
    for lo, hi in BANDS:
        band = (freqs >= lo) & (freqs < hi)
        out[f"teacher, copy synthesis's {lo}-{hi} Hz"] = istft(torch.where(band, sy, sx))
        out[f"copy synthesis, teacher's {lo}-{hi} Hz"] = istft(torch.where(band, sx, sy))
    return out


def phase(x: np.ndarray, y: np.ndarray, rate: int) -> dict[str, float]:
    """The phase distances of ``y`` from ``x`` (:func:`~tts_triton.training.hifigan_losses.phase_distances`, what
    ``train_vocoder --phase-weight`` trains on), over all bins and below :data:`LOW_HZ`, keyed ``"term, band"``."""
    import torch

    from tts_triton.training.hifigan_losses import PHASE_RESOLUTION, phase_distances

    real, fake = (torch.from_numpy(a.astype(np.float32))[None, None] for a in (x, y))
    out = {}
    for band, bins in (("all bins", None), (f"below {LOW_HZ} Hz", int(LOW_HZ * PHASE_RESOLUTION[0] / rate) + 1)):
        out.update({f"{term}, {band}": float(d) for term, d in phase_distances(real, fake, bins).items()})
    return out


def pair(teacher: np.ndarray, copy: Callable[[np.ndarray], np.ndarray]) -> tuple[dict[str, np.ndarray],
                                                                                   dict[str, float]]:
    """The hybrids of one teacher clip at SAMPLE_RATE and its copy synthesis by ``copy`` (log-mel -> audio), and the
    copy's :func:`phase` distances."""
    y = copy(audio.mel_spectrogram(teacher))[: len(teacher)]
    y = np.pad(y, (0, len(teacher) - len(y)))
    return hybrids(teacher, y, audio.SAMPLE_RATE), phase(teacher, y, audio.SAMPLE_RATE)


def measure(checkpoint: Path | None, voice: str, count: int,
            jobs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """DistillMOS of every hybrid of ``count`` held-out sentences in ``voice``, keyed by label, in table order; and
    the copy synthesis's :func:`phase` distances, sentence by sentence."""
    import torch

    from tts_triton.core import contract
    from tts_triton.evaluate.judges import distillmos
    from tts_triton.evaluate.naturalness import corpus_teacher
    from tts_triton.models.checkpoint import resolve

    vocoder = resolve(checkpoint).stages()[contract.VOCODER]

    def copy(mel: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return vocoder.vocode(torch.from_numpy(mel)[None]).reshape(-1).numpy()

    sentences = HELDOUT_SENTENCES[:count]
    with process_pool(jobs) as pool:
        teachers = [pool.submit(corpus_teacher, s, voice) for s in sentences]
        progress = ProgressLine("hybrids (copy synthesis + judge)", 2 * count)
        futures: dict[str, list[Future[float]]] = {}
        distances: dict[str, list[float]] = {}
        for teacher in teachers:
            mixes, copied = pair(teacher.result()[1].astype(np.float32), copy)
            for label, clip in mixes.items():
                futures.setdefault(label, []).append(pool.submit(distillmos, clip, audio.SAMPLE_RATE))
            for label, value in copied.items():
                distances.setdefault(label, []).append(value)
            progress.advance(detail="copy synthesis")
        for i in range(count):
            for fs in futures.values():
                fs[i].result()
            progress.advance(detail="judged")
    return {label: [f.result() for f in fs] for label, fs in futures.items()}, distances


def table(scores: dict[str, list[float]]) -> str:
    """Mean DistillMOS ± standard error per system, and its paired difference from the first (the teacher)."""
    base = np.asarray(next(iter(scores.values())), dtype=np.float64)
    rows = []
    for label, values in scores.items():
        v = np.asarray(values, dtype=np.float64)
        d = v - base
        rows.append([label, f"{v.mean():.2f} ± {standard_error(v):.2f}", f"{d.mean():+.2f} ± {standard_error(d):.2f}",
                     f"{(d < 0).sum()}"])
    return markdown_table(["system", "DistillMOS", "paired difference from the teacher", "sentences below it"], rows)


def phase_table(distances: dict[str, list[float]]) -> str:
    """Mean ± standard error of each :func:`phase` distance, a row per term and a column per band."""
    rows: dict[str, dict[str, str]] = {}
    for label, values in distances.items():
        term, band = label.split(", ")
        v = np.asarray(values, dtype=np.float64)
        rows.setdefault(term, {})[band] = f"{v.mean():.3f} ± {standard_error(v):.3f}"
    bands = list(next(iter(rows.values())))
    return markdown_table(["copy synthesis against the teacher", *bands], [[t, *(r[b] for b in bands)]
                                                                         for t, r in rows.items()])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.hybrids", description=__doc__.split("\n")[0])
    add_judged_run_options(p)
    p.add_argument("--voice", default="slt", help="the corpus voice whose teacher is copied")
    p.add_argument("--out", type=Path, default=Path("docs/records/eval/hybrids.md"))
    args = p.parse_args(argv)
    command = shlex.join(["python", "-m", "tts_triton.evaluate.hybrids", *(sys.argv[1:] if argv is None else argv)])
    started = time.monotonic()
    scores, distances = measure(args.checkpoint, args.voice, args.sentences, args.jobs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join([
        f"# What of the vocoder's sound the judge hears: {args.checkpoint or 'the shipped checkpoint'}, "
        f"`{args.voice}`", "",
        f"Generated by `{command}` in {time.monotonic() - started:.0f} s, on {args.sentences} held-out sentences "
        "(neutral preset). DistillMOS: mean ± standard error over sentences.", "", table(scores), "",
        "Phase distances of the copy synthesis from the teacher (`1 - cos` of each wrapped difference, weighted by the "
        "teacher's magnitude: 0 equal, 1 unrelated; the group delay and instantaneous frequency are what "
        "`train_vocoder --phase-weight` trains on), mean ± standard error over sentences:", "",
        phase_table(distances), ""]))
    args.out.with_suffix(".json").write_text(json.dumps(
        {"command": command, "sentences": list(HELDOUT_SENTENCES[: args.sentences]), "distillmos": scores,
         "phase": distances}, indent=1))
    print(f"hybrids -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
