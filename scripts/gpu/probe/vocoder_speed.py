"""The vocoder stage's own speed by generator variant, as the torch-cuda target runs it: a
:class:`~tts_triton.engine.graphs.StageRunner` with the served windows (48 and 96 frames, context included) and
batch buckets, on CUDA fp16 with CUDA graphs (the mel match in fp32), on a CPU fp32 and eager. Untrained weights:
the work per call is the same as trained ones'. Prints one table and writes it as Markdown.

    python3 scripts/gpu/probe/vocoder_speed.py [--variants v2 vocos] [--batches 1 8 32] [--calls 50] [--out FILE]

Columns: median milliseconds per call over ``--calls`` calls (after warm-up), seconds of emitted audio (the window
less its 24 frames of context) per second of calls, and each variant's time over the first variant's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from tts_triton.core import audio, contract, fundamental
from tts_triton.core.config import STREAMING, ModelConfig, VocoderConfig
from tts_triton.core.shapes import axis_values
from tts_triton.engine.graphs import StageRunner
from tts_triton.export.repository import RepositorySettings
from tts_triton.jobs.tables import print_report
from tts_triton.models.checkpoint import init_checkpoint


def runner(variant: str, device: torch.device) -> tuple[StageRunner, int]:
    """The vocoder stage of an untrained checkpoint with generator ``variant``, and its generator's parameters."""
    ckpt = init_checkpoint(ModelConfig(vocoder=VocoderConfig(variant)))
    stage = ckpt.stages()[contract.VOCODER]
    spec = contract.network_specs(ckpt.config)[contract.VOCODER]
    settings = RepositorySettings.for_target("torch-cuda").networks[contract.VOCODER]
    run = StageRunner(stage, spec, device=device, half=device.type == "cuda", max_batch_size=settings.max_batch_size,
                      axes=axis_values(), batch_budget=settings.batch_budget)
    run.warm_up()
    return run, sum(p.numel() for p in ckpt.generator.parameters())


def median_ms(run: StageRunner, batch: int, frames: int, calls: int) -> float:
    rng = np.random.default_rng(frames)
    mels = [(rng.standard_normal((1, frames, audio.N_MELS)) - 4.0).astype(np.float32) for _ in range(batch)]
    takes_track = contract.FUNDAMENTAL in run.spec.input_names
    feeds = [{contract.NET_MEL: m, **({contract.FUNDAMENTAL: fundamental.track(m[0])[None]} if takes_track else {})}
             for m in mels]
    for _ in range(3):
        run.run(feeds)
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        run.run(feeds)  # returns host arrays: the device work is done
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", nargs="+", default=["v2", "vocos"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    args = p.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = False  # the served setting
    context = STREAMING.left_context + STREAMING.right_context
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    how = "fp16, CUDA graphs" if device.type == "cuda" else "fp32, eager"
    lines = [f"Vocoder stage by generator variant on {name} ({how}); median of {args.calls} calls.", "",
             "| variant | generator parameters | batch | window frames | ms / call | x real time "
             "| time / first variant's |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    first: dict[tuple[int, int], float] = {}
    for variant in args.variants:
        run, params = runner(variant, device)
        for batch in args.batches:
            for frames in STREAMING.vocoder_frames:
                ms = median_ms(run, batch, frames, args.calls)
                first.setdefault((batch, frames), ms)
                audio_s = batch * (frames - context) * audio.HOP_LENGTH / audio.SAMPLE_RATE
                lines.append(f"| {variant} | {params:,} | {batch} | {frames} | {ms:.2f} | "
                             f"{audio_s / (ms / 1e3):,.0f} | {ms / first[(batch, frames)]:.2f} |")
                print(lines[-1], flush=True)
        del run
    text = "\n".join(lines) + "\n"
    print_report(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
