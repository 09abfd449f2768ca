"""How much vocoder context a streamed chunk needs: SNR of streamed against one-shot vocoding.

    .venv/bin/python scripts/vocoder_context.py [--checkpoint CKPT] [--contexts 4 8 12 16 24 [--right N]]
        [--chunks 8 16 48 68] [--decoded] [--text TEXT ...] [--heldout N] [--out PATH]

For a few teacher renderings (voices x emotions; slt by flite) of a sentence (``--text``, repeatable; ``--heldout
N`` adds held-out ones, and each row then gives its worst), or with ``--decoded`` the mel the checkpoint's own
decoder predicts for them (the voice bank's style of that voice and emotion: what is served), the log-mel goes
through the vocoder stage (postnet, generator and mel match, as served) once whole and once in the server's chunks
(``StreamingConfig.chunk_frames``, or ``--chunks``) with ``c`` frames of left and right context each (with ``--right
N``: ``c`` left, ``N`` right; without ``--contexts``, the server's), exactly as
:class:`tts_triton.serving.pipeline.ChunkPlanner` cuts them. Prints a markdown table of the SNR (dB) of the
concatenated stream against the one-shot audio; ``--out`` also writes it with this command line on top.
``StreamingConfig.left_context``/``right_context`` are chosen from this table.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from tts_triton.core import audio, contract
from tts_triton.core.audio import snr_db
from tts_triton.core.config import STREAMING
from tts_triton.core.fundamental import FundamentalTrack
from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, render
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.synthesis import voice_bank_for
from tts_triton.jobs.tables import markdown_table
from tts_triton.models.checkpoint import resolve
from tts_triton.serving.pipeline import ChunkPlanner, Pipeline
from tts_triton.serving.voice import Voice
from tts_triton.text import text_to_sequences

#: Frames of silence before the sentence in the one-shot reference: beyond the vocoder stage's reach.
LEAD = 48
TEXT = "Seams must not be heard between the chunks of a stream, even in a long sentence like this one."
CASES = (("m1", "sad"), ("m8", "neutral"), ("f2", "happy"), ("f5", "surprised"), ("slt", "neutral"))



def streamed(pipeline: Pipeline, mel: np.ndarray, left: int, right: int, step: int,
             sizes: tuple[int, ...] = STREAMING.chunk_frames) -> np.ndarray:
    """The stream of ``mel`` vocoded in chunks of ``sizes`` frames (the last size repeats) while frames arrive
    ``step`` at a time, each chunk with ``left`` and ``right`` frames of context."""
    longest = left + right + max(sizes)  # windows stay multiples of the smallest one
    unit = STREAMING.vocoder_frames[0]
    wide = tuple(range(unit, -(-longest // unit) * unit + 1, unit))  # up to the first multiple holding longest
    frames = wide if longest > STREAMING.vocoder_frames[-1] else None
    planner = ChunkPlanner(dataclasses.replace(STREAMING, chunk_frames=sizes, left_context=left, right_context=right,
                                               vocoder_frames=frames or STREAMING.vocoder_frames))
    track = FundamentalTrack()
    track.extend(mel)
    chunks = []
    for available in [*range(step, len(mel), step), len(mel), None]:  # None: finished, as the pipeline says last
        while (window := planner.next_window(available or len(mel), available is None)) is not None:
            chunks.append(asyncio.run(pipeline.vocode(mel, window, track=track)))
    return np.concatenate(chunks)


def in_silence(vocoder: torch.nn.Module, mel: np.ndarray) -> np.ndarray:
    """``mel`` vocoded whole after :data:`LEAD` frames of silence (then cut away), as a stream's first windows see
    it: so the table measures the context a chunk lacks, not zero padding against silence before the sentence."""
    silence = np.full((LEAD, mel.shape[1]), audio.SILENCE_LOG_MEL, np.float32)
    with torch.no_grad():
        whole = torch.from_numpy(np.concatenate([silence, mel]))[None]
        (samples,) = vocoder(whole, *vocoder.track(whole, LEAD))  # the phase's origin where the sentence starts
    return samples[0].numpy()[LEAD * audio.HOP_LENGTH :]


def decoded_mel(pipeline: Pipeline, text: str, style: np.ndarray) -> np.ndarray:
    """The log-mel frames ``[n, n_mels]`` the acoustic model predicts for the one sentence ``text``."""
    sequences = text_to_sequences(text, STREAMING.max_tokens)
    if len(sequences) != 1:
        raise SystemExit(f"--text must be one sentence: {text!r} plans {len(sequences)}")
    return asyncio.run(pipeline.synthesize(sequences, style))[1]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, help="default: the shipped default voice")
    p.add_argument("--contexts", type=int, nargs="+",
                   help="left contexts, a column each (default: the server's, "
                        f"{STREAMING.left_context} left and {STREAMING.right_context} right)")
    p.add_argument("--right", type=int, help="right context of every column (default: with --contexts, its context, "
                                             "symmetric)")
    p.add_argument("--chunks", type=int, nargs="+", default=list(STREAMING.chunk_frames),
                   help=f"chunk sizes in frames, the last repeating (default: the server's, {STREAMING.chunk_frames})")
    p.add_argument("--decoded", action="store_true",
                   help="the checkpoint's own predicted mel instead of the teacher's (its voice bank's styles)")
    p.add_argument("--text", action="append", help=f"a sentence; repeatable (default: {TEXT!r})")
    p.add_argument("--heldout", type=int, default=0, metavar="N",
                   help="also the first N one-sentence held-out sentences; each row is then its worst sentence")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.contexts is None:
        args.contexts = [STREAMING.left_context]
        args.right = STREAMING.right_context if args.right is None else args.right
    torch.set_num_threads(2)
    ckpt = resolve(args.checkpoint)
    cfg = ckpt.config
    synthesizer = Voice(ckpt)
    stages, pipeline = synthesizer.backend.stages, synthesizer.pipeline()
    bank = voice_bank_for(args.checkpoint, None, ckpt, [v for v, _ in CASES])[0] if args.decoded else None
    heldout = [t for t in HELDOUT_SENTENCES if len(text_to_sequences(t, STREAMING.max_tokens)) == 1]
    texts = [*(args.text or ([] if args.heldout else [TEXT])), *heldout[: args.heldout]]
    step = cfg.decoder.steps_per_call * cfg.decoder.frames_per_step  # frames per decoder call
    rows = []
    right = [c if args.right is None else args.right for c in args.contexts]
    for voice, emotion in CASES:
        print(f"{voice} {emotion} ...", file=sys.stderr, flush=True)
        worst = [np.inf] * len(args.contexts)
        for text in texts:
            if bank is not None:
                mel = decoded_mel(pipeline, text, bank.style(voice, emotion))
            else:
                mel = audio.mel_spectrogram(render(text, CORPUS_VOICES[voice], EMOTIONS[emotion]))
            reference = in_silence(stages[contract.VOCODER], mel)
            snrs = [snr_db(reference, streamed(pipeline, mel, c, r, step, tuple(args.chunks)))
                    for c, r in zip(args.contexts, right, strict=True)]
            worst = [min(w, v) for w, v in zip(worst, snrs, strict=True)]
        rows.append((f"{voice} {emotion}", worst))
    minimum = [min(values[i] for _, values in rows) for i in range(len(args.contexts))]
    body = [[name, *(f"{v:.1f}" for v in values)] for name, values in rows]
    body.append(["**worst**", *(f"**{v:.1f}**" for v in minimum)])
    heads = [f"context {c}" if args.right is None else f"left {c}, right {args.right}" for c in args.contexts]
    table = markdown_table(["rendering", *heads], body)
    print(table)
    if args.out:
        command = shlex.join([".venv/bin/python", "scripts/vocoder_context.py", *(argv or sys.argv[1:])])
        args.out.write_text(
            "# Vocoder context of streamed chunks\n\n"
            f"    {command}\n\n"
            f"Checkpoint: {ckpt.name}; the {'decoded' if args.decoded else 'teacher'} mel of "
            f"{len(texts)} sentence(s) ({', '.join(repr(t) for t in texts)}; each row: its worst). "
            f"SNR (dB) of the streamed audio (chunks {tuple(args.chunks)} frames, "
            f"frames arriving {step} at a time) against one-shot vocoding of the whole mel, by frames of context "
            f"on each side (the left one, where a right one is named). Windows are {STREAMING.vocoder_frames} "
            "frames (multiples of the first for wider contexts); the first chunks' windows reach into silence "
            f"before the sentence, and so does the one-shot reference ({LEAD} frames of it, cut away).\n\n"
            f"{table}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
