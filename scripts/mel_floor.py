"""How far the acoustic model's mels can take the system: Griffin-Lim from them, beside the HiFi-GAN.

    .venv/bin/python scripts/mel_floor.py [--checkpoint PATH] [--sentences 10] [--iterations 64] [--prenet-dropout]
        [--own-style] [--figure PNG] [--out PATH]

For every sixth of the evaluation's first ``6 x --sentences`` test sentences (voices and emotions both
vary, as in ``scripts/vocoder_check.py``) and the checkpoint's voice bank, four clips are compared with
espeak-ng's rendering by MCD-DTW, as :mod:`tts_triton.evaluate` measures it:

- **system**: the reference synthesizer's audio (acoustic model, then the HiFi-GAN), the evaluation's number;
- **GL on synthesized mels**: the postnet mels that the HiFi-GAN received, through Griffin-Lim instead
  (``scripts/mel_band.py``: pseudo-inverse of the filterbank, ``--iterations`` from a seeded phase);
- **GL on teacher-forced mels**: the acoustic model's postnet mels when its decoder reads espeak-ng's
  own previous frames (as in training and :mod:`tts_triton.training.gta`) instead of its own, same
  style vector; "-" where the front end splits the sentence into pieces;
- **... below / above 1 kHz**: espeak-ng's mel with only the teacher-forced mel's bins below (above)
  ``SPLIT_HZ`` put in, through Griffin-Lim: which part of the spectrum carries the acoustic model's
  error (below: the resolved harmonics, so F0, and the first formant; above: the higher formants and
  the noise);
- **vocoder on espeak-ng's mels**: copy synthesis, the vocoder alone (HiFi-GAN and the mel match);
- **GL on espeak-ng's mels**: the mel itself as the limit.

Griffin-Lim is a faithful if phase-poor inverse of a mel: its column on synthesized mels is what the
acoustic model's mels allow a vocoder that keeps their spectral envelope, and the gap to the system's
column is what the HiFi-GAN adds. ``--prenet-dropout`` keeps the decoder prenet's dropout on while
synthesizing, as Tacotron 2 does at inference (seeded; the shipped synthesizer leaves it off).
``--own-style`` styles the teacher-forced decodes by the style encoder's reading of espeak-ng's mel of
the sentence itself instead of the voice bank's preset: whether the preset is what holds them back.
``--figure`` draws the spectrograms of the first sentence: espeak-ng's rendering, the HiFi-GAN generator's
output alone and the system's (generator, then the mel match). Prints a markdown table; ``--out`` also
writes it with the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from mel_band import griffin_lim, linear_from_log_mel

from tts_triton.core import audio, contract
from tts_triton.data.prosody import EMOTIONS, VOICES, render
from tts_triton.evaluate.measures import features, mcd, select_items
from tts_triton.evaluate.synthesis import RecordingBackend, copy_synthesis, synthesize, voice_bank_for
from tts_triton.jobs.figures import pyplot, save_figure
from tts_triton.jobs.tables import markdown_table
from tts_triton.models.acoustic import AcousticModel
from tts_triton.models.checkpoint import resolve
from tts_triton.models.decoder import Prenet
from tts_triton.serving.voice import Voice
from tts_triton.text import text_to_sequences

COLUMNS = ("system", "GL on synthesized mels", "GL on teacher-forced mels", "... below 1 kHz only",
           "... above 1 kHz only", "vocoder on espeak-ng's mels", "GL on espeak-ng's mels")
SPLIT_HZ = 1000.0


def griffin_lim_of(log_mel: np.ndarray, iterations: int) -> np.ndarray:
    """Griffin-Lim audio of a log-mel ``[frames, n_mels]`` (centred frames: ``(frames - 1) * hop`` samples)."""
    linear = linear_from_log_mel(log_mel.T)
    return griffin_lim(linear, (linear.shape[1] - 1) * audio.HOP_LENGTH, iterations)


def teacher_forced_mel(acoustic: AcousticModel, ids: list[int], style: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Postnet mel ``[frames, n_mels]`` of ``acoustic`` decoding ``ids`` with ``target [frames, n_mels]`` as
    its previous frames (padded with silence to whole decoder steps)."""
    r = acoustic.decoder.r
    padded = np.full((-(-len(target) // r) * r, target.shape[1]), audio.SILENCE_LOG_MEL, np.float32)
    padded[: len(target)] = target
    phonemes = torch.tensor([ids])
    mask = torch.ones(phonemes.shape)
    with torch.inference_mode():
        memory = acoustic.text_encoder(phonemes, mask)
        mel, _, _ = acoustic.decoder(memory, mask, torch.from_numpy(style)[None], torch.from_numpy(padded)[None])
        return acoustic.decoder.postnet(mel)[0, : len(target)].numpy()


def band_hybrids(predicted: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``target [frames, n_mels]`` with ``predicted``'s bins peaking below ``SPLIT_HZ`` put in, and with those above."""
    low = audio.mel_points()[1:-1] < SPLIT_HZ
    below, above = target.copy(), target.copy()
    below[:, low] = predicted[:, low]
    above[:, ~low] = predicted[:, ~low]
    return below, above


def spectrograms(path: Path, title: str, espeak: np.ndarray, alone: np.ndarray, system: np.ndarray) -> None:
    """Log-magnitude spectrograms (0-6 kHz) of the three clips, one above the other, to ``path``."""
    from scipy.signal import stft

    fig, axes = pyplot().subplots(3, 1, figsize=(10, 9), sharex=True)
    clips = (("espeak-ng", espeak), ("HiFi-GAN generator alone", alone),
             ("system: generator, then the mel match", system))
    for ax, (name, x) in zip(axes, clips, strict=True):
        f, t, z = stft(x, audio.SAMPLE_RATE, nperseg=audio.N_FFT, noverlap=audio.N_FFT - audio.HOP_LENGTH)
        keep = f <= 6000
        ax.pcolormesh(t, f[keep], 20 * np.log10(np.abs(z[keep]) + 1e-6), vmin=-100, vmax=-20, shading="auto")
        ax.set_title(name)
        ax.set_ylabel("Hz")
    axes[-1].set_xlabel("s")
    fig.suptitle(title, fontsize=9)
    save_figure(fig, path, dpi=70)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, help="default: the shipped voice")
    p.add_argument("--sentences", type=int, default=10)
    p.add_argument("--iterations", type=int, default=64)
    p.add_argument("--prenet-dropout", action="store_true", help="keep the prenet's dropout on at inference")
    p.add_argument("--own-style", action="store_true", help="teacher-forced decodes styled by their own target mel")
    p.add_argument("--figure", type=Path, help="PNG of spectrograms of the first sentence")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = resolve(args.checkpoint)
    bank, _ = voice_bank_for(args.checkpoint, None, ckpt)
    networks = Voice(ckpt).backend
    stages = networks.stages
    if args.prenet_dropout:
        torch.manual_seed(0)
        for module in stages[contract.DECODER].modules():
            if isinstance(module, Prenet):
                module.train()
    backend = RecordingBackend(networks)
    vocoder = stages[contract.VOCODER]
    rows = []
    for i, item in enumerate(select_items(6 * args.sentences)[::6]):
        print(f"[{i + 1}/{args.sentences}] {item.voice} {item.emotion}: {item.text}", file=sys.stderr, flush=True)
        style = bank.style(item.voice, item.emotion)
        synth = asyncio.run(synthesize(backend, ckpt.config, item.text, style))
        with torch.inference_mode():
            post = vocoder.postnet(torch.from_numpy(synth.mel)[None])[0].numpy()
        speech = render(item.text, VOICES[item.voice], EMOTIONS[item.emotion])
        mel = audio.mel_spectrogram(speech)
        pieces = text_to_sequences(item.text)
        forced: list[np.ndarray | None] = [None, None, None]
        if len(pieces) == 1:
            if args.own_style:
                with torch.inference_mode():
                    style = ckpt.acoustic.style_encoder(torch.from_numpy(mel)[None])[0].numpy()
            tf = teacher_forced_mel(ckpt.acoustic, pieces[0], style, mel)
            forced = [griffin_lim_of(m, args.iterations) for m in (tf, *band_hybrids(tf, mel))]
        clips = (synth.audio, griffin_lim_of(post, args.iterations), *forced,
                 copy_synthesis(vocoder.vocode, speech), griffin_lim_of(mel, args.iterations))
        target = features(speech).speech
        if args.figure and i == 0:
            with torch.inference_mode():
                decoded = torch.from_numpy(synth.mel)[None]
                alone = vocoder.generator(torch.from_numpy(post).T[None], *vocoder.track(decoded))
            spectrograms(args.figure, f"{item.voice} {item.emotion}: {item.text}", speech,
                         alone.reshape(-1).numpy(), synth.audio)
        rows.append([item.voice, item.emotion,
                     *(np.nan if c is None else mcd(features(c).speech, target) for c in clips)])
    medians = np.nanmedian(np.array([r[2:] for r in rows], dtype=np.float64), axis=0)
    table = markdown_table(["voice", "emotion", *(f"{c} (dB)" for c in COLUMNS)],
                           [[*r[:2], *("-" if np.isnan(v) else f"{v:.2f}" for v in r[2:])] for r in rows]
                           + [["median", "", *(f"**{v:.2f}**" for v in medians)]])
    print(table)
    if args.out:
        command = shlex.join([".venv/bin/python", "scripts/mel_floor.py", *(argv or sys.argv[1:])])
        notes = ", prenet dropout on" if args.prenet_dropout else ""
        notes += ", teacher-forced decodes styled by their own target" if args.own_style else ""
        title = "# What the acoustic model's mels allow: Griffin-Lim beside the HiFi-GAN"
        args.out.write_text(f"{title}\n\n    {command}\n\n"
                            f"MCD-DTW against espeak-ng's rendering, {len(rows)} test sentences, checkpoint "
                            f"{ckpt.name}{notes}; see the script's docstring.\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
