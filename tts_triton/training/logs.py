"""What a run shows while it trains: a progress line, running means of the losses, a JSON-lines log, plots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tts_triton.jobs.figures import pyplot, save_figure
from tts_triton.jobs.progress import ProgressLine
from tts_triton.training.schedule import Budget


class StepProgress:
    """A :class:`~tts_triton.jobs.progress.ProgressLine` of training steps, at most every ``every`` seconds (and when
    forced): step, steps/s, losses, and the time left of the budget."""

    def __init__(self, tag: str, budget: Budget, first_step: int, max_steps: int | None, every: float = 30.0) -> None:
        self.budget, self.first_step = budget, first_step
        total = None if max_steps is None else max(max_steps - first_step, 0)
        self.line = ProgressLine(f"[{tag}] steps", total, every=every)

    def rate(self, step: int) -> float:
        return (step - self.first_step) / max(self.budget.elapsed, 1e-9)

    def update(self, step: int, losses: dict[str, float], force: bool = False) -> None:
        text = " ".join(f"{k} {v:.4g}" for k, v in losses.items())
        budget = "" if self.budget.left == float("inf") else f" | budget left {self.budget.left / 60:.1f} min"
        self.line.update(step - self.first_step, f"step {step} | {self.rate(step):.2f} steps/s | {text}{budget}",
                         force=force)


class Mean:
    """Running means of named scalars, each over the steps that gave it (kept on the device until read, so
    logging costs no sync per step)."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}

    def add(self, values: dict[str, torch.Tensor]) -> None:
        for k, v in values.items():
            v = v.detach().float()
            self.sums[k] = self.sums[k] + v if k in self.sums else v.clone()  # v may be overwritten in place
            self.counts[k] = self.counts.get(k, 0) + 1

    def read(self) -> dict[str, float]:
        """The means since the last read (then reset); {} when nothing was added."""
        out = {k: float(v) / self.counts[k] for k, v in self.sums.items()}
        self.sums, self.counts = {}, {}
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
