"""The pitch control measured per voice: the median F0 a requested shift achieves, beside what the vocoder allows.

    python -m tts_triton.evaluate.pitch --out docs/records/eval [--checkpoint PATH] [--voice-bank BANK] [--voices all]
        [--sentences 4] [--shifts 4,-4,12,-12]

Every voice of the bank (neutral emotion) says the first ``--sentences`` held-out sentences
(:mod:`~tts_triton.evaluate.heldout`), decoded once in process. Each decoder mel then goes through the pitch
control (:func:`~tts_triton.serving.controls.shift_pitch`) at every shift and through the vocoder, whole, its
level held to the mel's (:func:`~tts_triton.serving.controls.keep_level`): the one-shot equal of the streamed
audio. Per voice and shift:

- **level**: the RMS level of all its sentences shifted over unshifted, dB (:func:`level_db`); beside it the
  level before :func:`~tts_triton.serving.controls.keep_level`, what the vocoder gives of the shifted mel;
- **ratio**: median F0 of all its sentences shifted / unshifted, by :func:`median_f0` (what
  ``tests/model/test_controls.py`` asserts on); it passes at +-4 st when within :data:`TOLERANCE` of 2 ** (4 / 12),
  the downward ratio inverted as the test does;
- **ceiling** (+-4 st): the unshifted audio resynthesized by WORLD at F0 x 2 ** (s / 12) with its own envelope and
  aperiodicity, its log-mel through the vocoder: what an exact shift of the mel gives through this vocoder;
- **envelope** (+-4 st): the mean distance (dB, c1..c24 of WORLD's envelope,
  :func:`~tts_triton.evaluate.measures.features`) between the shifted and the unshifted audio, frame by frame (a
  shift keeps the timing) over frames loud in both; beside it the same for the ceiling's audio (its envelope is
  the unshifted one: what a pitch change alone costs the measure) and for the whole log-mel warped
  (:func:`~tts_triton.serving.controls.frequency_warp`: formants shift with the harmonics), for scale.

Prints the table (progress on stderr) and writes it, headed by the command line, to ``OUT/pitch-control.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core import audio
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.measures import world
from tts_triton.jobs.tables import markdown_table, write_report
from tts_triton.serving.controls import VOCODER_LAG, frequency_warp, keep_level, shift_pitch

#: harvest's F0 search range for the pitch checks (Hz): the measurement ``tests/model/test_controls.py`` uses.
F0_RANGE_HZ = (60.0, 700.0)
#: How far the achieved ratio at +-4 st may be from 2 ** (4 / 12) (the test's bound).
TOLERANCE = 0.06
REPORT_FILE = "pitch-control.md"
DEFAULT_SHIFTS = (4.0, -4.0, 12.0, -12.0)
DEFAULT_SENTENCES = 4
#: The shifts that also get the ceiling and envelope columns.
CHECKED = (4.0, -4.0)


def harvest(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """WORLD harvest over :data:`F0_RANGE_HZ` of float audio at SAMPLE_RATE: (F0 in Hz, 0 unvoiced; frame times)."""
    pyworld, _ = world()
    return pyworld.harvest(np.asarray(samples, np.float64), audio.SAMPLE_RATE, f0_floor=F0_RANGE_HZ[0],
                           f0_ceil=F0_RANGE_HZ[1])


def median_f0(*clips: np.ndarray) -> float:
    """Median F0 (Hz) over the voiced 5 ms frames of all ``clips`` (float audio at SAMPLE_RATE), each harvested
    on its own."""
    f0 = np.concatenate([harvest(c)[0] for c in clips])
    return float(np.median(f0[f0 > 0]))


def level_db(*clips: np.ndarray) -> float:
    """The RMS level (dB full scale) of all ``clips`` together."""
    samples = np.concatenate(clips).astype(np.float64)
    return float(10.0 * np.log10(max(float(np.mean(samples**2)), 1e-20)))


def passes(semitones: float, ratio: float) -> bool:
    """Whether ``ratio`` meets the test's bound: within :data:`TOLERANCE` of 2 ** (|s| / 12), inverted below 0."""
    return abs((ratio if semitones > 0 else 1.0 / ratio) - 2.0 ** (abs(semitones) / 12.0)) <= TOLERANCE


def resynthesized(samples: np.ndarray, ratio: float) -> np.ndarray:
    """``samples`` by WORLD with F0 times ``ratio``, envelope and aperiodicity kept."""
    pyworld, _ = world()
    x = np.asarray(samples, np.float64)
    f0, times = harvest(x)
    envelope = pyworld.cheaptrick(x, f0, times, audio.SAMPLE_RATE)
    aperiodicity = pyworld.d4c(x, f0, times, audio.SAMPLE_RATE)
    return pyworld.synthesize(f0 * ratio, envelope, aperiodicity, audio.SAMPLE_RATE).astype(np.float32)


def envelope_distance(references: Sequence[Any], clips: Sequence[np.ndarray]) -> float:
    """Mean mel-cepstral distance (dB) of WORLD's envelope between each of ``references``
    (:func:`~tts_triton.evaluate.measures.features`) and its equally timed clip, frame by frame over frames loud in
    both, averaged over the pairs."""
    from tts_triton.evaluate.measures import MCD_SCALE, features

    def one(fa: Any, b: np.ndarray) -> float:
        fb = features(b)
        n = min(len(fa.mcep), len(fb.mcep))
        loud = fa.loud[:n] & fb.loud[:n]
        return float(MCD_SCALE * np.sqrt(((fa.mcep[:n][loud] - fb.mcep[:n][loud]) ** 2).sum(1)).mean())

    return float(np.mean([one(fa, b) for fa, b in zip(references, clips, strict=True)]))


@dataclass
class VoiceResult:
    voice: str
    base_hz: float
    ratio: dict[float, float] = field(default_factory=dict)
    loudness_db: dict[float, float] = field(default_factory=dict)
    vocoded_db: dict[float, float] = field(default_factory=dict)
    ceiling: dict[float, float] = field(default_factory=dict)
    envelope_db: dict[float, float] = field(default_factory=dict)
    moved_db: dict[float, float] = field(default_factory=dict)
    ideal_db: dict[float, float] = field(default_factory=dict)


def measure(ckpt: Any, bank: Any, voices: Sequence[str], sentences: int,
            shifts: Sequence[float] = DEFAULT_SHIFTS, lag: float = VOCODER_LAG,
            checked: Sequence[float] = CHECKED) -> list[VoiceResult]:
    """:class:`VoiceResult` per voice (see the module's docstring), shifts moved ``lag`` semitones further (as
    :func:`~tts_triton.serving.controls.shift_pitch` does); ceiling and envelope for the shifts in ``checked``."""
    import torch  # the model extra

    from tts_triton.core import contract
    from tts_triton.core.config import STREAMING
    from tts_triton.evaluate.measures import features
    from tts_triton.serving.voice import Voice
    from tts_triton.text import text_to_sequences

    synthesizer = Voice(ckpt)
    pipeline = synthesizer.pipeline()
    vocoder = synthesizer.backend.stages[contract.VOCODER]

    def vocode(mel: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            (samples,) = vocoder(torch.from_numpy(np.ascontiguousarray(mel, np.float32))[None])
        return samples[0].numpy()

    results = []
    for n, voice in enumerate(voices):
        print(f"[{n + 1}/{len(voices)}] {voice} ...", file=sys.stderr, flush=True)
        style = bank.style(voice, "neutral")
        mels = [asyncio.run(pipeline.synthesize(text_to_sequences(text, STREAMING.max_tokens), style))[1]
                for text in HELDOUT_SENTENCES[:sentences]]
        plain = [vocode(m) for m in mels]
        result = VoiceResult(voice, median_f0(*plain))
        plain_features = [features(p) for p in plain] if any(s in checked for s in shifts) else []
        for s in shifts:
            moved = [shift_pitch(m, s, lag) for m in mels]
            vocoded = [vocode(m) for m in moved]
            shifted = [keep_level(v, m) for v, m in zip(vocoded, moved, strict=True)]
            result.ratio[s] = median_f0(*shifted) / result.base_hz
            result.loudness_db[s] = level_db(*shifted) - level_db(*plain)
            result.vocoded_db[s] = level_db(*vocoded) - level_db(*plain)
            if s not in checked:
                continue
            ideal = [vocode(audio.mel_spectrogram(resynthesized(p, 2.0 ** (s / 12.0)))) for p in plain]
            result.ceiling[s] = median_f0(*ideal) / result.base_hz
            warp = frequency_warp(2.0 ** (s / 12.0), ckpt.config.n_mels).T.astype(np.float32)
            result.ideal_db[s] = envelope_distance(plain_features, ideal)
            result.envelope_db[s] = envelope_distance(plain_features, shifted)
            result.moved_db[s] = envelope_distance(plain_features, [vocode(m @ warp) for m in mels])
        results.append(result)
    return results


def table(results: Sequence[VoiceResult], shifts: Sequence[float] = DEFAULT_SHIFTS) -> str:
    """Markdown table: voice, base F0, the ratio per shift (ceiling beside the checked ones), envelope distances."""
    checked = [s for s in shifts if results and s in results[0].ceiling]
    head = ["voice", "F0 Hz", *(f"{s:+g} st" + (" (ceiling)" if s in checked else "") for s in shifts),
            *(f"envelope dB {s:+g} (ceiling, moved)" for s in checked), "+-4 st",
            *(f"level dB {s:+g} (unheld)" for s in shifts)]
    target = ["target", "", *(f"{2.0 ** (s / 12.0):.3f}" for s in shifts), *("" for _ in checked),
              f"+-{TOLERANCE}", *("0" for _ in shifts)]
    rows = [target]
    for r in results:
        cells = [r.voice, f"{r.base_hz:.0f}"]
        cells += [f"{r.ratio[s]:.3f}" + (f" ({r.ceiling[s]:.3f})" if s in r.ceiling else "") for s in shifts]
        cells += [f"{r.envelope_db[s]:.1f} ({r.ideal_db[s]:.1f}, {r.moved_db[s]:.1f})" for s in checked]
        cells.append("pass" if all(passes(s, r.ratio[s]) for s in CHECKED if s in r.ratio) else "FAIL")
        cells += [f"{r.loudness_db[s]:+.2f} ({r.vocoded_db[s]:+.2f})" for s in shifts]
        rows.append(cells)
    return markdown_table(head, rows, left=len(head))


def main(argv: Sequence[str] | None = None) -> int:
    from tts_triton.evaluate.synthesis import voice_bank_for
    from tts_triton.models.checkpoint import UNTRAINED_LABEL, fingerprint, resolve  # torch (the model extra)

    parser = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.pitch", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help=f"folder for {REPORT_FILE}")
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--voice-bank", type=Path, help="voice bank JSON (default: voice_bank.json beside the "
                                                        "checkpoint, else built)")
    parser.add_argument("--voices", default="all", help="comma-separated voices of the bank, or 'all'")
    parser.add_argument("--sentences", type=int, default=DEFAULT_SENTENCES,
                        help=f"held-out sentences per voice (at most {len(HELDOUT_SENTENCES)})")
    parser.add_argument("--shifts", default=",".join(f"{s:g}" for s in DEFAULT_SHIFTS), help="semitones")
    parser.add_argument("--quick", action="store_true", help="ratios only: no ceiling or envelope columns")
    parser.add_argument("--lag", type=float, help="semitones added to each shift for the vocoder "
                                                  "(default: serving.controls.VOCODER_LAG; 0: the bare warp)")
    args = parser.parse_args(argv)
    if not 1 <= args.sentences <= len(HELDOUT_SENTENCES):
        parser.error(f"--sentences must be in 1..{len(HELDOUT_SENTENCES)}")
    shifts = [float(s) for s in args.shifts.split(",")]
    if any(s == 0 for s in shifts):
        parser.error("--shifts: 0 is no shift")
    ckpt = resolve(args.checkpoint)
    if not ckpt.trained:
        print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
    bank, source = voice_bank_for(args.checkpoint, args.voice_bank, ckpt)
    voices = bank.voices if args.voices == "all" else args.voices.split(",")
    unknown = [v for v in voices if v not in bank.voices]
    if unknown:
        parser.error(f"--voices: {', '.join(unknown)} not in the bank ({', '.join(bank.voices)})")
    lag = VOCODER_LAG if args.lag is None else args.lag
    report = table(measure(ckpt, bank, voices, args.sentences, shifts, lag, () if args.quick else CHECKED), shifts)
    print(report)
    command = shlex.join(["python", "-m", "tts_triton.evaluate.pitch", *(sys.argv[1:] if argv is None else argv)])
    text = [
        "# Pitch control per voice", "",
        f"Checkpoint {ckpt.name} `{fingerprint(ckpt)[:16]}`, voice bank {source} (default voice "
        f"{bank.default_voice}); neutral emotion, the first {args.sentences} held-out sentences; vocoder lag "
        f"{lag:g} st; written by", "",
        f"    OMP_NUM_THREADS=1 {command}", "",
        "Achieved median-F0 ratio (shifted / unshifted, WORLD harvest "
        f"{F0_RANGE_HZ[0]:.0f}-{F0_RANGE_HZ[1]:.0f} Hz over all the voice's sentences); in brackets the ceiling: "
        "the unshifted audio resynthesized by WORLD at the target F0, its mel through the same vocoder. "
        "Envelope: mean WORLD mel-cepstral distance (dB) between the shifted and the unshifted audio; in brackets "
        "the same for the ceiling's audio (envelope kept exactly: what the pitch change alone costs the measure) and "
        "with the whole log-mel warped (formants moved). +-4 st passes when both ratios are within "
        f"{TOLERANCE} of 2 ** (4 / 12) (the downward one inverted), as tests/model/test_controls.py asserts. "
        "Level: the RMS level of the shifted audio over the unshifted (dB; the control keeps it within 1 dB, as "
        "tests/model/test_controls.py asserts); in brackets the same before the level is held to the mel's "
        "(serving.controls.keep_level): what the vocoder alone gives of the shifted mel.", "",
        report, ""]
    write_report(args.out, REPORT_FILE, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
