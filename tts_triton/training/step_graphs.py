"""A training step's phases captured as CUDA graphs: the host launches each phase once per step instead of its
thousands of kernels, which, for the vocoder's discriminators, is what bounded a step
(docs/records/bench/vocoder-training-h200.md).

A phase is a callable over static inputs (tensors the caller refills in place before each replay) that runs
forward and backward passes and returns its loss tensors, detached: no autograd graph may outlive a step,
since a gradient accumulator made eagerly on another stream breaks the capture. Its gradients are allocated by
the capture, so each replay writes them afresh (nothing accumulates); the caller must not drop them
(``zero_grad``) afterwards. Optimizer steps stay outside the graphs, between replays, so learning rates and
skipped steps work as eagerly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

#: Eager runs of every phase on a side stream before capture: cuDNN's autotuning and the allocator settle there.
WARMUP_RUNS = 3
#: Relative (and absolute) difference allowed between a replayed loss and the eager one: cuDNN's bf16 kernels
#: differ run to run by far less; a capture that reads or writes the wrong memory differs by far more.
TOLERANCE = 1e-2

#: What a phase returns: one loss, or named loss terms.
Losses = Tensor | dict[str, Tensor]


def _drop_grads(parameters: Sequence[nn.Parameter]) -> None:
    for p in parameters:
        p.grad = None


class CapturedPhase:
    """``phase`` captured as a CUDA graph (into ``pool``, another capture's :attr:`pool`, when given, so that phases
    of one step share memory); :meth:`replay` runs it and returns its outputs (the same tensors every time,
    overwritten by the next replay). ``parameters`` are those the phase computes gradients for: their gradients
    become the capture's (only theirs: another phase's captured gradients must stay where its graph writes).

    The capture checks itself: replayed once on the inputs the eager warm-up ran on, it must give the warm-up's
    losses again (within bf16's run-to-run noise) and leave a gradient on every one of ``parameters``."""

    def __init__(self, phase: Callable[[], Losses], parameters: Iterable[nn.Parameter],
                 pool: tuple[int, int] | None = None) -> None:
        params = [p for p in parameters if p.requires_grad]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                _drop_grads(params)
                eager = _values(phase())
        torch.cuda.current_stream().wait_stream(side)
        _drop_grads(params)
        self.graph = torch.cuda.CUDAGraph()
        # thread-local: the data loader's pinning thread goes on working during the capture
        with torch.cuda.graph(self.graph, pool=pool, capture_error_mode="thread_local"):
            self.outputs = phase()
        replayed = _values(self.replay())
        if eager.keys() != replayed.keys() or any(
                not math.isclose(eager[k], replayed[k], rel_tol=TOLERANCE, abs_tol=TOLERANCE) for k in eager):
            raise RuntimeError(f"the captured phase replays as {replayed}, eagerly {eager}: the capture is wrong")
        if missing := sum(p.grad is None for p in params):
            raise RuntimeError(f"{missing} of {len(params)} parameters have no gradient after the captured phase")

    @property
    def pool(self) -> tuple[int, int]:
        """The capture's memory pool, for the captures of the step's other phases."""
        return self.graph.pool()

    def replay(self) -> Losses:
        """Run the phase on what its static inputs hold now."""
        self.graph.replay()
        return self.outputs


def _values(losses: Losses) -> dict[str, float]:
    items = losses.items() if isinstance(losses, dict) else [("loss", losses)]
    return {k: float(v) for k, v in items}
