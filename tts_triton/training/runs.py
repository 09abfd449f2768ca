"""Where a training run starts and what it records: the checkpoint or state it starts from, the state it saves
for ``--resume``, and the history kept in the checkpoint's ``info``.

Both trainers start from a :mod:`tts_triton.models.checkpoint` file (``--init``) or from the seeded initialisation of
a config, and write a whole checkpoint (config, acoustic model, generator) in which their own part is trained
and the other part is carried over from where they started. Two ways to go on from an earlier run:

- ``--init CKPT`` is weights-only: the step count, epoch and history come back from ``info``, the optimizer
  restarts (with a short re-warmup, see :func:`tts_triton.training.schedule.lr_factor`). That is what fits
  through the GPU host's file limits (an fp16 checkpoint of ~21 MB; optimizer moments and discriminators are
  ~1 GB).
- ``--resume`` continues the run in ``--out`` exactly: its :data:`RUN_CHECKPOINT_FILE` and :data:`STATE_FILE`
  (optimizer moments, the vocoder's discriminators, where the schedules started; see :func:`save_state`).
  For runs on the same host, such as two back-to-back calls on a GPU machine kept warm.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tts_triton.core.config import ModelConfig, VocoderConfig
from tts_triton.models.checkpoint import Checkpoint, init_checkpoint, load_checkpoint

#: In a run's ``--out`` folder: the training state for ``--resume``, and the run's checkpoint (whole voice).
STATE_FILE = "state.pt"
RUN_CHECKPOINT_FILE = "checkpoint.pt"


def fresh_config(frames_per_step: int, vocoder_variant: str) -> ModelConfig:
    """The default :class:`ModelConfig` with the decoder's r and the vocoder variant set."""
    base = ModelConfig()
    return dataclasses.replace(base, decoder=dataclasses.replace(base.decoder, frames_per_step=frames_per_step),
                               vocoder=VocoderConfig(vocoder_variant))


def start_run(out: Path, resume: bool, init: Path | None, config: ModelConfig, seed: int,
              new_generator: str | None = None) -> tuple[Checkpoint, dict[str, Any] | None]:
    """The checkpoint a run starts from and the training state to resume (None: fresh optimizers).

    With ``resume`` and a ``state.pt`` in ``out``: ``out/checkpoint.pt`` and that state. Otherwise the file
    ``init`` (its own config wins; with ``new_generator`` naming another variant than its generator's, a seeded
    untrained generator of that variant replaces it), else the seeded initialisation of ``config``.
    """
    if resume and (out / STATE_FILE).exists():
        return load_checkpoint(out / RUN_CHECKPOINT_FILE), torch.load(out / STATE_FILE, map_location="cpu")
    if init is None:
        return init_checkpoint(config, seed), None
    ckpt = load_checkpoint(init)
    if new_generator is not None and new_generator != ckpt.config.vocoder.variant:
        ckpt = ckpt.with_fresh_generator(new_generator, seed)
    return ckpt, None


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


def run_record(module: str, argv: Sequence[str], first_step: int, step: int, minutes: float,
               device: torch.device, ranks: int = 1) -> dict[str, Any]:
    """One entry of a checkpoint's ``runs`` history: how this run got from ``first_step`` to ``step``."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"command": command_line(module, argv, ranks), "from_step": first_step, "to_step": step,
            "minutes": round(minutes, 2), "device": f"{ranks} x {name}" if ranks > 1 else name}


def corpus_info(summary: dict[str, Any]) -> dict[str, Any]:
    """The part of a corpus ``dataset.json`` worth keeping in a checkpoint."""
    keys = ("utterances", "hours", "hours_by_split", "espeak", "flite", "agreement", "sentences")
    info = {k: summary[k] for k in keys if k in summary}
    if "counts" in summary:  # which voices the run learned, and how much of each
        info["voices"] = summary["counts"]["voice"]
    return info
