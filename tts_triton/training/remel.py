"""Carry a checkpoint over to another mel layout (number of bins, upper band edge) to train it further.

    python -m tts_triton.training.remel --checkpoint OLD.pt --out NEW.pt [--half]

Only the layers that read or write mel bins change shape: the decoder's prenet input and frame
projection, the postnet's first and last layers, and the HiFi-GAN generator's input convolution (the
style encoder's convolutions slide along the mel axis and its GRU sees the same reduced width). Their
weights are resampled along the mel axis by frequency, so the carried network starts close to the old
one on the band both layouts cover:

- where a layer *writes* mel bins (rows of the frame projection, the postnet's last convolution and its
  batch norm), each new bin takes the value interpolated at its centre frequency from the old bins'
  centres (held constant past the old band's ends);
- where a layer *reads* mel bins (columns of the prenet, the postnet's first convolution, the generator's
  input convolution), the new weights are ``W_old @ A`` with ``A`` the interpolation of new-bin values at
  the old bins' centres. When the new mel, interpolated back, gives the old one, the layer computes
  exactly what it did; bins above the old band get (almost) zero weight and are learnt in training.

Everything else is copied. The step counts stay in ``info``; ``info["remel"]`` records the change.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from tts_triton.core import audio
from tts_triton.models.acoustic import AcousticModel
from tts_triton.models.checkpoint import Checkpoint, load_checkpoint
from tts_triton.models.generators import build_generator
from tts_triton.training.runs import command_line

MODULE = "tts_triton.training.remel"


def resampling(old: tuple[int, float], new: tuple[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Matrices ``[new bins, old bins]`` that carry values (``write``) and weights (``read``) between layouts.

    ``old`` and ``new`` are ``(n_mels, fmax)``. See the module docstring for the two rules.
    """
    f_old, f_new = audio.mel_points(old[0], fmax=old[1])[1:-1], audio.mel_points(new[0], fmax=new[1])[1:-1]
    write = np.stack([np.interp(f_new, f_old, column) for column in np.eye(old[0])], axis=1)
    back = np.stack([np.interp(f_old, f_new, column) for column in np.eye(new[0])], axis=1)  # A: [old, new]
    return write, back.T


def _along(tensor: Tensor, axis: int, matrix: np.ndarray) -> Tensor:
    """``tensor`` with its ``axis`` (old bins, possibly ``k`` groups of them) mapped through ``matrix``."""
    m = torch.from_numpy(matrix).to(tensor.dtype)
    n_old = matrix.shape[1]
    moved = tensor.movedim(axis, 0)
    groups = moved.reshape(moved.shape[0] // n_old, n_old, *moved.shape[1:])
    mapped = torch.einsum("no,go...->gn...", m, groups)
    return mapped.reshape(-1, *moved.shape[1:]).movedim(0, axis).contiguous()


def carry_state(old_state: dict[str, Tensor], new_shapes: dict[str, torch.Size], old: tuple[int, float],
                new: tuple[int, float]) -> dict[str, Tensor]:
    """``old_state`` with every mel-axis tensor resampled to the shape ``new_shapes`` asks for.

    A tensor whose first axis holds whole groups of old bins writes mel bins; one whose second axis
    holds exactly the old bins reads them. Weight-normed pairs (``weight_g``/``weight_v``) are resampled
    as the weight they make. Raises ``ValueError`` for a changed shape that neither rule explains.
    """
    write, read = resampling(old, new)
    n_old = old[0]
    state = dict(old_state)
    for key, tensor in old_state.items():
        shape = new_shapes[key]
        if tensor.shape == shape or key.endswith("weight_g"):
            continue
        if key.endswith("weight_v") and key[: -1] + "g" in old_state and tensor.shape[1] == n_old:
            g = old_state[key[:-1] + "g"]
            weight = g * tensor / tensor.norm(dim=tuple(range(1, tensor.dim())), keepdim=True)
            carried = _along(weight, 1, read)
            state[key] = carried
            state[key[:-1] + "g"] = carried.norm(dim=tuple(range(1, carried.dim())), keepdim=True)
        elif tensor.dim() >= 2 and tensor.shape[1] == n_old and tensor.shape[0] == shape[0]:
            state[key] = _along(tensor, 1, read)
        elif tensor.shape[0] % n_old == 0 and tensor.shape[1:] == shape[1:]:
            state[key] = _along(tensor, 0, write)
        else:
            raise ValueError(f"cannot carry {key} from {tuple(tensor.shape)} to {tuple(shape)}")
        if state[key].shape != shape:
            raise ValueError(f"carried {key} to {tuple(state[key].shape)}, expected {tuple(shape)}")
    return state


def remel(ckpt: Checkpoint, n_mels: int = audio.N_MELS, fmax: float = audio.FMAX) -> Checkpoint:
    """``ckpt`` carried over to ``n_mels`` bins up to ``fmax`` Hz (see the module docstring)."""
    old = (ckpt.config.n_mels, ckpt.config.mel_fmax)
    config = dataclasses.replace(ckpt.config, n_mels=n_mels, mel_fmax=fmax,
                                 vocoder=dataclasses.replace(ckpt.config.vocoder, n_mels=n_mels))
    acoustic, generator = AcousticModel(config), build_generator(config.vocoder)
    for target, source in ((acoustic, ckpt.acoustic), (generator, ckpt.generator)):
        shapes = {k: v.shape for k, v in target.state_dict().items()}
        target.load_state_dict(carry_state(source.state_dict(), shapes, old, (n_mels, fmax)))
    change = {"from": {"n_mels": old[0], "fmax": old[1]}, "to": {"n_mels": n_mels, "fmax": fmax}}
    info = {**ckpt.info, "remel": [*ckpt.info.get("remel", []), change]}
    return Checkpoint(config, acoustic.eval(), generator.eval(), ckpt.trained, info)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--half", action="store_true", help="store floating tensors as fp16")
    args = p.parse_args(argv)
    carried = remel(load_checkpoint(args.checkpoint, any_mel=True))
    carried.info["commands"] = [*carried.info.get("commands", []), command_line(MODULE, argv)]
    carried.save(args.out, half=args.half)
    print(f"wrote {args.out}: {carried.config.n_mels} mel bins up to {carried.config.mel_fmax:g} Hz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
