"""Plumbing shared by the two trainers: where training starts, budgets, progress, logs, plots, checkpoints.

Both trainers start from a :mod:`tts_triton.checkpoint` file (``--init``) or from the seeded
initialisation of a config, and write a whole checkpoint (config, acoustic model, generator) in
which their own part is trained and the other part is carried over from where they started.
:func:`merge` joins an acoustic run and a vocoder run into the checkpoint that ships::

    python -m tts_triton.training.common merge --acoustic A.pt --vocoder V.pt --out voice.pt [--half]

and :mod:`tts_triton.release` makes the result the default voice.

Two ways to go on from an earlier run:

- ``--init CKPT`` is weights-only: the step count, epoch and history come back from ``info``, the
  optimizer restarts (with a short re-warmup, see :func:`lr_factor`). That is what fits through the GPU
  host's file limits (an fp16 checkpoint of ~21 MB; optimizer moments and discriminators are ~1 GB).
- ``--resume`` continues the run in ``--out`` exactly: its ``checkpoint.pt`` and ``state.pt`` (optimizer
  moments, the vocoder's discriminators, where the schedules started; see :func:`save_state`). For runs
  on the same host, such as two back-to-back calls on a GPU machine kept warm.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shlex
import sys
import time
import wave
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tts_triton import audio
from tts_triton.checkpoint import Checkpoint, init_checkpoint, load_checkpoint
from tts_triton.config import ModelConfig, VocoderConfig
from tts_triton.figures import pyplot, save_figure


def pick_device(name: str | None = None, fixed_shapes: bool = False) -> torch.device:
    """``name`` or, when None, CUDA if available else CPU. On CUDA: TF32 matmuls and convolutions, and cuDNN
    autotuning when the input shapes repeat (``fixed_shapes``; with varying shapes it would retune every batch)."""
    device = torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = fixed_shapes
    return device


@dataclasses.dataclass(frozen=True)
class Ranks:
    """This process's place among the ranks of a ``torch.distributed.run`` launch (0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local: int = 0

    @property
    def main(self) -> bool:
        """Whether this rank logs, validates and writes checkpoints."""
        return self.rank == 0

    @property
    def device(self) -> str | None:
        """This rank's own GPU when there are several ranks on CUDA; None: :func:`pick_device`'s default."""
        return f"cuda:{self.local}" if self.world > 1 and torch.cuda.is_available() else None


def join_ranks() -> Ranks:
    """Join the process group when launched by ``torch.distributed.run`` (NCCL on CUDA, else gloo) and bind
    this process to GPU ``LOCAL_RANK``; a plain launch is rank 0 of 1 and joins nothing."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Ranks()
    ranks = Ranks(int(os.environ["RANK"]), world, int(os.environ["LOCAL_RANK"]))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(ranks.local)
    torch.distributed.init_process_group("nccl" if cuda else "gloo")
    return ranks


def fresh_config(frames_per_step: int, vocoder_variant: str) -> ModelConfig:
    """The default :class:`ModelConfig` with the decoder's r and the HiFi-GAN variant set."""
    base = ModelConfig()
    return dataclasses.replace(base, decoder=dataclasses.replace(base.decoder, frames_per_step=frames_per_step),
                               vocoder=VocoderConfig(vocoder_variant))


STATE_FILE = "state.pt"
CHECKPOINT_FILE = "checkpoint.pt"


def start_run(out: Path, resume: bool, init: Path | None, config: ModelConfig,
              seed: int) -> tuple[Checkpoint, dict[str, Any] | None]:
    """The checkpoint a run starts from and the training state to resume (None: fresh optimizers).

    With ``resume`` and a ``state.pt`` in ``out``: ``out/checkpoint.pt`` and that state. Otherwise the file
    ``init`` (its own config wins), else the seeded initialisation of ``config``.
    """
    if resume and (out / STATE_FILE).exists():
        return load_checkpoint(out / CHECKPOINT_FILE), torch.load(out / STATE_FILE, map_location="cpu")
    return (load_checkpoint(init) if init is not None else init_checkpoint(config, seed)), None


def save_state(out: Path, state: dict[str, Any]) -> None:
    """Write ``state`` (state dicts and integers) as ``out/state.pt``, atomically, for ``--resume``."""
    tmp = out / f"{STATE_FILE}.tmp"
    torch.save(state, tmp)
    tmp.replace(out / STATE_FILE)


def part_info(ckpt: Checkpoint, part: str) -> dict[str, Any]:
    """What ``ckpt.info`` records about the training of ``part`` (``acoustic`` or ``vocoder``); {} if none."""
    return dict(ckpt.info.get(part, {}))


def both_trained(info: dict[str, Any]) -> bool:
    """Whether ``info`` records trained steps for both the acoustic model and the vocoder."""
    return all(dict(info.get(part, {})).get("steps", 0) > 0 for part in ("acoustic", "vocoder"))


def command_line(module: str, argv: Sequence[str], ranks: int = 1) -> str:
    """The shell command that reruns ``python -m module argv`` (under ``torch.distributed.run`` on ``ranks``)."""
    launch = ["python"]
    if ranks > 1:
        launch += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)]
    return shlex.join([*launch, "-m", module, *argv])


def autocast(amp: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA when ``amp == "bf16"``, else a no-op context."""
    if amp == "bf16" and device.type == "cuda":
        return torch.autocast("cuda", torch.bfloat16)
    return contextlib.nullcontext()


def run_record(module: str, argv: Sequence[str], first_step: int, step: int, minutes: float,
               device: torch.device, ranks: int = 1) -> dict[str, Any]:
    """One entry of a checkpoint's ``runs`` history: how this run got from ``first_step`` to ``step``."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"command": command_line(module, argv, ranks), "from_step": first_step, "to_step": step,
            "minutes": round(minutes, 2), "device": f"{ranks} x {name}" if ranks > 1 else name}


class Budget:
    """A wall-clock allowance of ``minutes`` (None: unlimited), counted from construction."""

    def __init__(self, minutes: float | None) -> None:
        self.start = time.monotonic()
        self.seconds = math.inf if minutes is None else minutes * 60.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    @property
    def left(self) -> float:
        return max(0.0, self.seconds - self.elapsed)

    def expired(self) -> bool:
        return self.elapsed >= self.seconds


class Progress:
    """Prints one progress line at most every ``every`` seconds: step, steps/s, losses, elapsed and ETA.

    The ETA is the sooner of the budget's end and ``max_steps`` at the current rate.
    """

    def __init__(self, tag: str, budget: Budget, first_step: int, max_steps: int | None, every: float = 30.0) -> None:
        self.tag, self.budget, self.max_steps, self.every = tag, budget, max_steps, every
        self.first_step = first_step
        self.last = -math.inf

    def rate(self, step: int) -> float:
        return (step - self.first_step) / max(self.budget.elapsed, 1e-9)

    def update(self, step: int, losses: dict[str, float], force: bool = False) -> None:
        if not force and time.monotonic() - self.last < self.every:
            return
        self.last = time.monotonic()
        rate = self.rate(step)
        eta = self.budget.left
        if self.max_steps is not None and rate > 0:
            eta = min(eta, (self.max_steps - step) / rate)
        text = " ".join(f"{k} {v:.4g}" for k, v in losses.items())
        print(f"[{self.tag}] step {step} | {rate:.2f} steps/s | {text} | {self.budget.elapsed / 60:.1f} min, "
              f"ETA {eta / 60:.1f} min", flush=True)


class Mean:
    """Running means of named scalars (kept on the device until read, so logging costs no sync per step)."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, values: dict[str, torch.Tensor]) -> None:
        for k, v in values.items():
            v = v.detach().float()
            self.sums[k] = self.sums[k] + v if k in self.sums else v
        self.count += 1

    def read(self) -> dict[str, float]:
        """The means since the last read (then reset); {} when nothing was added."""
        out = {k: float(v) / self.count for k, v in self.sums.items()} if self.count else {}
        self.sums, self.count = {}, 0
        return out


class JsonlLog:
    """Appends one JSON object per line to ``path`` (kept across resumed runs)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, row: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def lr_factor(step: int, optimizer_start: int, warmup: int, half_life: float, floor: float = 0.05) -> float:
    """Learning-rate multiplier at global ``step``.

    Linear warmup over ``warmup`` steps counted from ``optimizer_start`` (the step where the optimizer's
    state began: 0, or the step training resumed at), times an exponential decay that halves every
    ``half_life`` global steps, never below ``floor``.
    """
    warm = min(1.0, (step - optimizer_start + 1) / max(warmup, 1))
    return warm * max(floor, 0.5 ** (step / half_life))


def corpus_info(summary: dict[str, Any]) -> dict[str, Any]:
    """The part of a corpus ``dataset.json`` worth keeping in a checkpoint."""
    keys = ("utterances", "hours", "hours_by_split", "espeak", "sentences")
    return {k: summary[k] for k in keys if k in summary}


def save_wav(path: Path, samples: np.ndarray, rate: int = audio.SAMPLE_RATE) -> None:
    """Write mono float audio in [-1, 1] as 16-bit PCM WAV."""
    pcm = np.round(np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def plot_panels(path: Path, panels: Sequence[tuple[str, np.ndarray]], title: str = "") -> None:
    """One PNG of stacked image panels, each ``(name, array [rows, cols])`` drawn with time along x.

    Alignments are given ``[decoder steps, tokens]`` and mels ``[frames, n_mels]``; both are transposed
    so that the token / mel axis runs up.
    """
    fig, axes = pyplot().subplots(len(panels), 1, figsize=(10, 2.6 * len(panels)), squeeze=False)
    for ax, (name, array) in zip(axes[:, 0], panels, strict=True):
        image = ax.imshow(np.asarray(array, dtype=np.float32).T, aspect="auto", origin="lower",
                          interpolation="none")
        ax.set_title(name, fontsize=9)
        fig.colorbar(image, ax=ax, pad=0.01)
    if title:
        fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=80)


def plot_losses(path: Path, rows: Sequence[dict[str, Any]], keys: Sequence[str], title: str) -> None:
    """Loss curves (log scale) of ``keys`` over ``step`` from log rows, train rows solid and val rows dashed."""
    fig, ax = pyplot().subplots(figsize=(10, 4))
    for kind, style in (("train", "-"), ("val", "--")):
        picked = [r for r in rows if r.get("kind") == kind]
        for key in keys:
            points = [(r["step"], r[key]) for r in picked if key in r and r[key] > 0]
            if points:
                ax.plot(*zip(*points, strict=True), style, label=f"{kind} {key}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=10)
    if ax.lines:
        ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=80)


def merge(acoustic: Checkpoint, vocoder: Checkpoint, command: str | None = None) -> Checkpoint:
    """A checkpoint with the acoustic model of ``acoustic`` and the generator of ``vocoder``.

    Both must share the config. ``trained`` is true when both parts have trained steps; ``info`` keeps
    each part's record (``acoustic``, ``vocoder``), the data, and appends ``command`` to ``commands``.
    """
    if acoustic.config != vocoder.config:
        raise ValueError("the acoustic and vocoder checkpoints have different configs")
    info = {**vocoder.info, **acoustic.info, "acoustic": part_info(acoustic, "acoustic"),
            "vocoder": part_info(vocoder, "vocoder")}
    commands = [*acoustic.info.get("commands", [])]
    commands += [c for c in vocoder.info.get("commands", []) if c not in commands]
    if command:
        commands.append(command)
    info["commands"] = commands
    trained = both_trained(info)
    info["name"] = "default" if trained else "partly-trained"
    return Checkpoint(acoustic.config, acoustic.acoustic, vocoder.generator, trained, info)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.training.common", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="join the acoustic model of one checkpoint and the generator of another")
    m.add_argument("--acoustic", type=Path, required=True)
    m.add_argument("--vocoder", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--half", action="store_true", help="store floating tensors as fp16 (the shipped form)")
    m.add_argument("--record", help="a command line to append to info['commands'] (e.g. the GPU run's)")
    args = parser.parse_args(argv)
    merged = merge(load_checkpoint(args.acoustic), load_checkpoint(args.vocoder), args.record)
    merged.save(args.out, half=args.half)
    steps = {part: merged.info[part].get("steps", 0) for part in ("acoustic", "vocoder")}
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB, trained={merged.trained}, steps {steps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
