"""How much vocoder context a streamed chunk needs: SNR of streamed against one-shot vocoding.

    .venv/bin/python scripts/vocoder_context.py [--checkpoint CKPT] [--contexts 4 8 12 16 24] [--right N]
        [--chunks 12 24 48 72] [--out PATH]

For a few teacher renderings (voices x emotions; slt by flite), the log-mel goes through the vocoder stage
(postnet + HiFi-GAN, as served) once whole and once in the server's chunks (``StreamingConfig.chunk_frames``,
or ``--chunks``) with ``c`` frames of left and right context each (with ``--right N``: ``c`` left, ``N`` right),
exactly as :class:`tts_triton.serving.pipeline.ChunkPlanner` cuts them. Prints a markdown table of the SNR (dB)
of the concatenated stream against the one-shot audio; ``--out`` also writes it with this command line on top.
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
from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, render
from tts_triton.jobs.tables import markdown_table
from tts_triton.models.checkpoint import resolve
from tts_triton.serving.backends import TorchBackend
from tts_triton.serving.pipeline import ChunkPlanner, Pipeline

TEXT = "Seams must not be heard between the chunks of a stream, even in a long sentence like this one."
CASES = (("m1", "sad"), ("m8", "neutral"), ("f2", "happy"), ("f5", "surprised"), ("slt", "neutral"))



def streamed(pipeline: Pipeline, mel: np.ndarray, left: int, right: int, step: int,
             sizes: tuple[int, ...] = STREAMING.chunk_frames) -> np.ndarray:
    """The stream of ``mel`` vocoded in chunks of ``sizes`` frames (the last size repeats) while frames arrive
    ``step`` at a time, each chunk with ``left`` and ``right`` frames of context."""
    longest = left + right + max(sizes)  # windows stay multiples of the smallest one
    unit = STREAMING.vocoder_frames[0]
    frames = tuple(range(unit, longest + unit, unit)) if longest > STREAMING.vocoder_frames[-1] else None
    planner = ChunkPlanner(dataclasses.replace(STREAMING, chunk_frames=sizes, left_context=left, right_context=right,
                                               vocoder_frames=frames or STREAMING.vocoder_frames))
    chunks = []
    for available in range(step, len(mel) + step, step):
        finished = available >= len(mel)
        while (window := planner.next_window(min(available, len(mel)), finished)) is not None:
            chunks.append(asyncio.run(pipeline.vocode(mel, window)))
    return np.concatenate(chunks)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, help="default: the shipped default voice")
    p.add_argument("--contexts", type=int, nargs="+", default=[4, 8, 12, 16, 24])
    p.add_argument("--right", type=int, help="right context of every column (default: its context, symmetric)")
    p.add_argument("--chunks", type=int, nargs="+", default=list(STREAMING.chunk_frames),
                   help=f"chunk sizes in frames, the last repeating (default: the server's, {STREAMING.chunk_frames})")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = resolve(args.checkpoint)
    cfg = ckpt.config
    stages = ckpt.stages()
    pipeline = Pipeline(TorchBackend(stages, cfg), cfg)
    step = cfg.decoder.steps_per_call * cfg.decoder.frames_per_step  # frames per decoder call
    rows = []
    for voice, emotion in CASES:
        print(f"{voice} {emotion} ...", file=sys.stderr, flush=True)
        mel = audio.mel_spectrogram(render(TEXT, CORPUS_VOICES[voice], EMOTIONS[emotion]))
        with torch.no_grad():
            (one_shot,) = stages[contract.VOCODER](torch.from_numpy(mel)[None])
        reference = one_shot[0].numpy()
        right = [c if args.right is None else args.right for c in args.contexts]
        snrs = [snr_db(reference, streamed(pipeline, mel, c, r, step, tuple(args.chunks)))
                for c, r in zip(args.contexts, right, strict=True)]
        rows.append((f"{voice} {emotion}", snrs))
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
            f"Checkpoint: {ckpt.name}. SNR (dB) of the streamed audio (chunks {tuple(args.chunks)} frames, "
            f"frames arriving {step} at a time) against one-shot vocoding of the whole mel, by frames of context "
            f"on each side (the left one, where a right one is named). Windows are {STREAMING.vocoder_frames} "
            "frames (multiples of the first for wider contexts); the first chunks' windows reach into silence "
            "before the sentence, where one-shot vocoding sees its convolutions' zero padding: that difference is "
            "the ceiling of 51-60 dB at wide contexts.\n\n"
            f"{table}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
