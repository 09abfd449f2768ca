"""Where training runs: the device, the ranks of a ``torch.distributed.run`` launch, and mixed precision."""

from __future__ import annotations

import contextlib
import dataclasses
import os

import torch


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


def autocast(amp: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA when ``amp == "bf16"``, else a no-op context."""
    if amp == "bf16" and device.type == "cuda":
        return torch.autocast("cuda", torch.bfloat16)
    return contextlib.nullcontext()
