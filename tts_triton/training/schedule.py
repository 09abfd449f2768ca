"""How long and how fast a run trains: its wall-clock budget and its learning-rate schedule."""

from __future__ import annotations

import math
import time


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


def lr_factor(step: int, optimizer_start: int, warmup: int, half_life: float, floor: float = 0.05,
              decay_from: int = 0) -> float:
    """Learning-rate multiplier at global ``step``.

    Linear warmup over ``warmup`` steps counted from ``optimizer_start`` (the step where the optimizer's
    state began: 0, or the step training resumed at), times an exponential decay that halves every
    ``half_life`` global steps from ``decay_from`` on, never below ``floor``.
    """
    warm = min(1.0, (step - optimizer_start + 1) / max(warmup, 1))
    return warm * max(floor, 0.5 ** (max(0, step - decay_from) / half_life))
