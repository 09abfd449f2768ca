"""Compare vocoders by copy synthesis: espeak-ng's own mel through each checkpoint's HiFi-GAN generator.

    .venv/bin/python scripts/vocoder_check.py CKPT [CKPT ...] [--sentences 10] [--generator-only] [--out PATH]

For held-out test sentences (``tts_triton.evaluate.measures.select_items``: every voice and emotion), the
rendering's log-mel goes through each checkpoint's vocoder alone (no acoustic model: its HiFi-GAN
generator, then the mel match unless ``--generator-only`` or the checkpoint turns it off) and the output
is compared with the rendering itself, sample-aligned:

- **MCD-DTW** as the evaluation measures it (WORLD envelope, mel-cepstrum c1..c24);
- **log-STFT distance** at three resolutions (mean |log magnitude| difference, Hann windows of 256,
  1024 and 4096 samples): phase or periodicity artifacts a mel loss does not see smear the fine and
  coarse resolutions;
- **F0 error** (RMS over frames both call voiced, Hz) and **voicing disagreement** (% of frames);
- **aperiodicity distance** (WORLD D4C band aperiodicity, mean |dB| difference over voiced frames):
  how far the harmonic-to-noise balance is off, the buzz or hoarseness that adversarial training fixes.

Prints a markdown table (medians over sentences); ``--out`` also writes it with the command line.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.signal
import torch

from tts_triton.core import contract
from tts_triton.data.prosody import EMOTIONS, VOICES, render
from tts_triton.evaluate.measures import F0_CEIL_HZ, F0_FLOOR_HZ, FRAME_PERIOD_MS, features, mcd, select_items
from tts_triton.evaluate.synthesis import copy_synthesis
from tts_triton.jobs.tables import markdown_table
from tts_triton.models.checkpoint import resolve

RESOLUTIONS = (256, 1024, 4096)


def log_stft_distance(a: np.ndarray, b: np.ndarray, n_fft: int) -> float:
    """Mean |log |STFT(a)| - log |STFT(b)|| (Hann window ``n_fft``, hop ``n_fft / 4``)."""
    spec = [np.abs(scipy.signal.stft(x, window="hann", nperseg=n_fft, noverlap=3 * n_fft // 4)[2]) for x in (a, b)]
    return float(np.mean(np.abs(np.log(spec[0] + 1e-5) - np.log(spec[1] + 1e-5))))


def periodicity(a: np.ndarray, b: np.ndarray, rate: int) -> tuple[float, float, float]:
    """(F0 RMS error Hz, voicing disagreement %, band aperiodicity distance dB) of ``a`` against ``b``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pyworld
    tracks = []
    for x in (a, b):
        f0, t = pyworld.harvest(x, rate, f0_floor=F0_FLOOR_HZ, f0_ceil=F0_CEIL_HZ, frame_period=FRAME_PERIOD_MS)
        ap = pyworld.code_aperiodicity(pyworld.d4c(x, f0, t, rate), rate)
        tracks.append((f0, ap))
    (fa, apa), (fb, apb) = tracks
    n = min(len(fa), len(fb))
    fa, fb, apa, apb = fa[:n], fb[:n], apa[:n], apb[:n]
    both = (fa > 0) & (fb > 0)
    f0_rmse = float(np.sqrt(np.mean((fa[both] - fb[both]) ** 2))) if both.any() else float("nan")
    voicing = float(100.0 * np.mean((fa > 0) != (fb > 0)))
    aperiodicity = float(np.mean(np.abs(apa[both] - apb[both]))) if both.any() else float("nan")
    return f0_rmse, voicing, aperiodicity


def measure(vocode: Callable[[torch.Tensor], torch.Tensor], speech: np.ndarray, rate: int) -> list[float]:
    """The table's columns for one rendering."""
    synth = copy_synthesis(vocode, speech).astype(np.float64)
    ref = speech.astype(np.float64)
    n = min(len(synth), len(ref))
    synth, ref = np.ascontiguousarray(synth[:n]), np.ascontiguousarray(ref[:n])
    row = [mcd(features(synth).speech, features(ref).speech)]
    row += [log_stft_distance(synth, ref, n_fft) for n_fft in RESOLUTIONS]
    row += list(periodicity(synth, ref, rate))
    return row


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoints", nargs="+", help="checkpoint files; 'default' for the shipped voice")
    p.add_argument("--sentences", type=int, default=10)
    p.add_argument("--generator-only", action="store_true", help="leave the mel match out")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    from tts_triton.core import audio

    vocoders = {name: resolve(None if name == "default" else Path(name)).stages()[contract.VOCODER].float()
                for name in args.checkpoints}
    if args.generator_only:
        for stage in vocoders.values():
            stage.mel_match = None
    items = select_items(6 * args.sentences)[::6]  # every sixth: voices and emotions both vary
    results: dict[str, list[list[float]]] = {name: [] for name in vocoders}
    for i, item in enumerate(items):
        print(f"[{i + 1}/{len(items)}] {item.voice} {item.emotion}: {item.text}", file=sys.stderr, flush=True)
        speech = render(item.text, VOICES[item.voice], EMOTIONS[item.emotion])
        for name, stage in vocoders.items():
            results[name].append(measure(stage.vocode, speech, audio.SAMPLE_RATE))
    columns = ["MCD-DTW dB", *(f"log-STFT {n}" for n in RESOLUTIONS), "F0 RMSE Hz", "voicing diff %",
               "aperiodicity dB"]
    medians = {name: np.nanmedian(np.array(rows), axis=0) for name, rows in results.items()}
    table = markdown_table(["generator", *columns], [[name, *(f"{v:.3g}" for v in m)] for name, m in medians.items()])
    print(table)
    if args.out:
        command = shlex.join([".venv/bin/python", "scripts/vocoder_check.py", *(argv or sys.argv[1:])])
        args.out.write_text(f"# Copy synthesis: vocoders against espeak-ng\n\n    {command}\n\n"
                            f"Medians over {len(items)} test sentences (see the script's docstring).\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
