"""The skeleton both trainers share: where a run starts, its budget, the step loop, logging, validation
and checkpoints. A trainer subclasses :class:`TrainingRun` and fills in its hooks:

- :meth:`~TrainingRun.forward_backward`: one batch's losses and gradients, and the value whose
  finiteness decides whether the step is taken;
- :meth:`~TrainingRun.optimizer_step`, :meth:`~TrainingRun.validate`, :meth:`~TrainingRun.record`
  (what the checkpoint's ``info[part]`` says about this trainer), :meth:`~TrainingRun.checkpoint`
  and :meth:`~TrainingRun.training_state` (what ``--resume`` needs).

A run stops at ``--steps`` or when ``--minutes`` run out; it validates and saves every ``--val-every``
steps and at the end; ``--profile N`` records N of its steps (:mod:`tts_triton.training.profiling`).
More than :data:`MAX_NONFINITE_STEPS` skipped (non-finite) steps end it with an error. Under
``torch.distributed.run`` the ranks agree every step on skipping and stopping; rank 0 alone logs,
validates and writes.
"""

from __future__ import annotations

import argparse
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tts_triton.core.config import DecoderConfig, VocoderConfig
from tts_triton.models.checkpoint import Checkpoint
from tts_triton.training.devices import Ranks, pick_device
from tts_triton.training.logs import JsonlLog, Mean, StepProgress, plot_losses
from tts_triton.training.profiling import SKIP_STEPS, StepProfiler
from tts_triton.training.runs import (
    RUN_CHECKPOINT_FILE,
    corpus_info,
    fresh_config,
    part_info,
    run_record,
    save_state,
    start_run,
)
from tts_triton.training.schedule import Budget

#: Steps with a non-finite loss or gradient a run may skip before it gives up.
MAX_NONFINITE_STEPS = 20


def run_parser(module: str, description: str, *, resumed: str, amp: str, val_every: int,
               val_utterances: int) -> argparse.ArgumentParser:
    """The command line of a trainer with the flags :class:`TrainingRun` reads; the trainer adds its own.
    ``resumed`` says what ``--resume`` restores besides the checkpoint; the rest are defaults."""
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    p.add_argument("--data", type=Path, required=True, help="corpus directory (tts_triton.data.corpus build)")
    p.add_argument("--out", type=Path, required=True, help="run directory (created)")
    p.add_argument("--init", type=Path, help="checkpoint to start from (weights, config, step count)")
    p.add_argument("--resume", action="store_true",
                   help=f"continue the run in --out (checkpoint and {resumed}) when it has one; else --init")
    p.add_argument("--minutes", type=float, help="wall-clock budget; saves and exits when it runs out")
    p.add_argument("--steps", type=int, help="stop at this global step")
    p.add_argument("--frames-per-step", type=int, default=DecoderConfig.frames_per_step,
                   help="decoder r of a fresh model (ignored with --init)")
    p.add_argument("--vocoder-variant", help=f"generator variant of a fresh model (default {VocoderConfig.variant}); "
                   "the vocoder trainer with --init and another variant than its generator's starts a fresh "
                   "generator of this one beside its acoustic model")
    p.add_argument("--amp", choices=("off", "bf16"), default=amp, help="autocast on CUDA (see the module docstring)")
    p.add_argument("--val-every", type=int, default=val_every, help="steps between validations and checkpoints")
    p.add_argument("--val-utterances", type=int, default=val_utterances)
    p.add_argument("--workers", type=int, default=4, help="data loader processes")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", help="torch device (default: CUDA if available, else CPU)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="record N typical steps with PyTorch's profiler into profile.txt")
    return p


class TrainingRun(ABC):
    """One run of a trainer from parsed ``args`` (the flags of :func:`run_parser`).

    Subclasses set :attr:`part` (``acoustic`` or ``vocoder``), :attr:`module`, :attr:`log_every` and
    :attr:`loss_keys`, build their data and models after ``super().__init__`` and set :attr:`corpus_summary`.
    """

    part: str
    module: str
    #: Training steps per logged row of mean losses.
    log_every: int
    #: The loss columns of ``losses.png``.
    loss_keys: tuple[str, ...]

    def __init__(self, args: argparse.Namespace, argv: Sequence[str], ranks: Ranks | None = None,
                 fixed_shapes: bool = False) -> None:
        self.args, self.argv = args, list(argv)
        self.ranks = ranks = ranks or Ranks()
        self.budget = Budget(args.minutes)
        self.device = pick_device(args.device or ranks.device, fixed_shapes)
        torch.manual_seed(args.seed)
        variant = args.vocoder_variant
        self.ckpt, self.state = start_run(args.out, args.resume, args.init,
                                          fresh_config(args.frames_per_step, variant or VocoderConfig.variant),
                                          args.seed, new_generator=variant if self.part == "vocoder" else None)
        self.previous = part_info(self.ckpt, self.part)
        self.first_step = self.step = int(self.previous.get("steps", 0))
        self.epoch = int(self.previous.get("epochs", 0))
        #: Where the learning-rate schedule (re)started: kept by ``--resume``, else this run's first step.
        self.optimizer_start = int(self.state["optimizer_start"]) if self.state is not None else self.first_step
        self.history = list(self.previous.get("history", []))
        self.out: Path = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = JsonlLog(self.out / "losses.jsonl")
        self.progress = StepProgress(self.part, self.budget, self.first_step, args.steps)
        self.skipped = 0
        self.corpus_summary: dict[str, Any] = {}

    # --- hooks --------------------------------------------------------------------------------------

    @abstractmethod
    def forward_backward(self) -> tuple[dict[str, Tensor], Tensor]:
        """Take the next batch (setting :attr:`epoch`), compute its losses and gradients; returns the loss
        terms to log and the scalar whose finiteness decides whether :meth:`optimizer_step` runs."""

    @abstractmethod
    def optimizer_step(self) -> None:
        """Apply the gradients of the last :meth:`forward_backward`."""

    @abstractmethod
    def validate(self, plot: Path) -> dict[str, float]:
        """Validation losses of the current weights; draws ``plot``."""

    @abstractmethod
    def record(self) -> dict[str, Any]:
        """This trainer's settings for ``info[part]`` (steps, epochs, history and runs are added)."""

    @abstractmethod
    def checkpoint(self, info: dict[str, Any]) -> Checkpoint:
        """The whole checkpoint with the current weights and ``info``."""

    @abstractmethod
    def training_state(self) -> dict[str, Any]:
        """What ``--resume`` restores besides the checkpoint (optimizers...; ``optimizer_start`` is added)."""

    def steps_before_profile(self) -> int:
        """Steps of this run that ``--profile`` leaves alone before it records (the steps must be typical)."""
        return SKIP_STEPS

    def log_columns(self) -> dict[str, Any]:
        """Extra columns of a logged training row (e.g. the learning rate)."""
        return {}

    # --- the skeleton -------------------------------------------------------------------------------

    def done(self, at_step: int) -> bool:
        """Whether the run ends at ``at_step``: the budget is spent or ``--steps`` is reached."""
        return self.budget.expired() or (self.args.steps is not None and at_step >= self.args.steps)

    def agree(self, check: Tensor) -> tuple[bool, bool]:
        """(``check`` is finite on every rank, rank 0 says stop after this step)."""
        stop_here = self.done(self.step + 1) and self.ranks.main
        flags = torch.stack([check.detach().float().reshape(()),
                             torch.tensor(float(stop_here), device=check.device)])
        if self.ranks.world > 1:
            torch.distributed.all_reduce(flags)
        finite, stop = flags.tolist()
        return math.isfinite(finite), stop > 0

    def run(self) -> int:
        """Train until :meth:`done`, then validate and save a last time; returns the exit status 0."""
        mean = Mean()
        profiler = (StepProfiler(self.out / "profile.txt", self.args.profile, self.device, self.steps_before_profile())
                    if self.args.profile and self.ranks.main else None)
        stop = self.done(self.step)
        while not stop:
            terms, check = self.forward_backward()
            finite, stop = self.agree(check)
            if not finite:
                self.skipped += 1
                if self.skipped > MAX_NONFINITE_STEPS:
                    raise RuntimeError(f"{self.skipped} steps with a non-finite loss or gradient; stopping")
                continue
            self.optimizer_step()
            self.step += 1
            if profiler is not None:
                profiler.step()
            if not self.ranks.main:
                continue
            mean.add(terms)
            if self.step % self.log_every == 0:
                row = mean.read()
                self.log.write({"kind": "train", "step": self.step, "epoch": self.epoch, **self.log_columns(),
                                "minutes": round(self.budget.elapsed / 60, 2), **row})
                self.progress.update(self.step, row)
            if self.step % self.args.val_every == 0 and not stop:
                self.save(self.validation())
        if profiler is not None:
            profiler.close()
        if self.ranks.main:
            self.save(self.validation())
            self.progress.update(self.step, {"skipped": self.skipped}, force=True)
            print(f"[{self.part}] done at step {self.step} after {self.budget.elapsed / 60:.1f} min -> "
                  f"{self.out / RUN_CHECKPOINT_FILE}", flush=True)
        return 0

    def validation(self) -> dict[str, float]:
        """Validate, keep the plot as ``latest.png``, log and print the result."""
        plot = self.out / "plots" / f"step-{self.step:06d}.png"
        result = self.validate(plot)
        (self.out / "latest.png").write_bytes(plot.read_bytes())
        self.log.write({"kind": "val", "step": self.step, "epoch": self.epoch,
                        "minutes": round(self.budget.elapsed / 60, 2), **result})
        print(f"[{self.part}] val step {self.step}: " + " ".join(f"{k} {v:.4g}" for k, v in result.items()),
              flush=True)
        return result

    def save(self, val_losses: dict[str, float]) -> None:
        """Write ``checkpoint.pt`` (with this run in ``info[part]``), ``state.pt`` and ``losses.png``."""
        self.history.append({"step": self.step, **{k: round(v, 5) for k, v in val_losses.items()}})
        runs = [*self.previous.get("runs", []), run_record(self.module, self.argv, self.first_step, self.step,
                                                           self.budget.elapsed / 60, self.device, self.ranks.world)]
        info = {**self.ckpt.info, "data": corpus_info(self.corpus_summary),
                self.part: {"steps": self.step, "epochs": self.epoch, **self.record(), "last_val": self.history[-1],
                            "history": self.history, "runs": runs}}
        self.checkpoint(info).save(self.out / RUN_CHECKPOINT_FILE)
        save_state(self.out, {**self.training_state(), "optimizer_start": self.optimizer_start})
        plot_losses(self.out / "losses.png", self.log.rows(), self.loss_keys, f"{self.part} losses")
