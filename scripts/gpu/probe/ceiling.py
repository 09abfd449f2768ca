"""The in-process ceiling of the served networks: how much audio one GPU makes per second when it runs nothing but
the decoder's and the vocoder's device calls, one after another, as the torch-cuda target runs them
(:class:`~tts_triton.engine.graphs.StageRunner`: fp16, CUDA graphs, the served batch buckets, budgets and K). No
Triton, no Python backend, no BLS: what serving could reach if its host-side work cost nothing. Prints one table
and writes it as Markdown, the host named (CPU, GPU, kernel), and with ``--json`` as the ceiling file the bench's
``--ceiling`` reads (its best row is the ceiling the served throughput is judged against).

    python3 scripts/gpu/probe/ceiling.py [--checkpoint FILE] [--batches 8 16 32 64] [--tokens 64] [--calls 30]
                                         [--out FILE] [--json FILE]

At B streams decoding together, a decoder call makes B x K x r mel frames and a vocoder call on B steady-state
windows (the widest, its context on both sides excluded) emits B x (window - context) frames. The ceiling at B is
the frame rate of the two in turn, over the audio's frames per second:
``x real time = 1 / (t_decoder / decoder_frames + t_vocoder / vocoder_frames) / frames_per_second``. Left out: the
text encoder, once per sentence (about 1.3 ms against some 60 decoder calls of a sentence at K=16), and any overlap
of the two networks' calls (the served models run in processes of their own, under MPS, so they can overlap: the
served figure may pass this one by that much).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from tts_triton.bench.describe import describe_machine
from tts_triton.core import audio, contract
from tts_triton.core.config import STREAMING, ModelConfig
from tts_triton.core.contract import ModelSpec
from tts_triton.core.shapes import axis_values
from tts_triton.engine.graphs import StageRunner
from tts_triton.export.repository import RepositorySettings
from tts_triton.jobs.tables import print_report
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint


def runners(checkpoint: Path, device: torch.device) -> tuple[ModelConfig, dict[str, StageRunner]]:
    """The served model config and a warmed-up runner of the decoder and of the vocoder, as torch-cuda serves them."""
    settings = RepositorySettings.for_target("torch-cuda")
    ckpt = load_checkpoint(checkpoint)
    config = settings.serving_config(ckpt.config)
    stages, specs = ckpt.stages(config), contract.network_specs(config)
    built = {}
    for name in (contract.DECODER, contract.VOCODER):
        net = settings.networks[name]
        built[name] = StageRunner(stages[name], specs[name], device=device, half=device.type == "cuda",
                                  max_batch_size=net.max_batch_size, axes=axis_values(), batch_budget=net.batch_budget)
        built[name].warm_up()
    return config, built


def feeds(spec: ModelSpec, batch: int, sizes: dict[str, int], seed: int) -> list[dict[str, np.ndarray]]:
    """``batch`` one-row requests of ``spec`` with its dynamic axes at ``sizes``: the mask all ones (every token
    real), the rest small random values (the work per call does not depend on them)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(batch):
        row = {}
        for t in spec.inputs:
            shape = (1, *(sizes[d] if isinstance(d, str) else d for d in t.dims))
            row[t.name] = (np.ones(shape, np.float32) if t.name == contract.MASK
                           else (0.1 * rng.standard_normal(shape)).astype(np.float32))
        rows.append(row)
    return rows


def median_ms(run: StageRunner, requests: list[dict[str, np.ndarray]], calls: int) -> float:
    """Median wall time of ``run.run(requests)`` (which returns host arrays: the device work is done)."""
    for _ in range(3):
        run.run(requests)
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        run.run(requests)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    p.add_argument("--batches", nargs="+", type=int, default=[8, 16, 32, 64])
    p.add_argument("--tokens", type=int, default=64, help="the text's token bucket (a sentence of about 40-60)")
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    p.add_argument("--json", type=Path, help="also write the rows here, for the bench's --ceiling")
    args = p.parse_args(argv)
    if args.tokens not in STREAMING.token_buckets:
        raise SystemExit(f"--tokens {args.tokens}: the served token buckets are {STREAMING.token_buckets}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = False  # the served setting
    config, built = runners(args.checkpoint, device)
    window = STREAMING.vocoder_frames[-1]
    decoder_frames = config.decoder.frames_per_call
    vocoder_frames = window - STREAMING.left_context - STREAMING.right_context
    frame_rate = audio.SAMPLE_RATE / audio.HOP_LENGTH
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    how = "fp16, CUDA graphs" if device.type == "cuda" else "fp32, eager"
    lines = [f"The in-process ceiling on {name} ({how}): {args.checkpoint.name}, generator "
             f"{config.vocoder.variant}, K={config.decoder.steps_per_call} x r={config.decoder.frames_per_step}, "
             f"{args.tokens} tokens, vocoder windows of {window} frames; median of {args.calls} calls.", "",
             *(f"- {label}: {value}" for label, value in describe_machine() if label in ("CPU", "GPU", "OS")), "",
             "| streams | decoder ms / call | vocoder ms / call | decoder share | x real time |",
             "|---:|---:|---:|---:|---:|"]
    rows = []
    for batch in args.batches:
        dec = median_ms(built[contract.DECODER],
                        feeds(built[contract.DECODER].spec, batch, {contract.TOKENS: args.tokens}, batch), args.calls)
        voc = median_ms(built[contract.VOCODER],
                        feeds(built[contract.VOCODER].spec, batch, {contract.FRAMES: window}, batch), args.calls)
        per_frame = dec / (batch * decoder_frames) + voc / (batch * vocoder_frames)  # ms per mel frame
        share = dec / (batch * decoder_frames) / per_frame
        x_real_time = 1e3 / per_frame / frame_rate
        rows.append({"streams": batch, "decoder_ms": dec, "vocoder_ms": voc, "x_real_time": x_real_time})
        digits = 0 if x_real_time >= 10 else 2  # a CPU's ceiling is below 1x
        lines.append(f"| {batch} | {dec:.2f} | {voc:.2f} | {share:.0%} | {x_real_time:,.{digits}f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print_report(text, args.out)
    if args.json:
        args.json.write_text(json.dumps({"device": name, "how": how, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
