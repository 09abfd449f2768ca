"""Join an acoustic run and a vocoder run into the checkpoint that ships::

    python -m tts_triton.training.merge --acoustic A.pt --vocoder V.pt --out voice.pt [--half]

:mod:`tts_triton.export.release` then makes the result the default voice.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from tts_triton.models.checkpoint import Checkpoint, load_checkpoint
from tts_triton.training.runs import both_trained, part_info


def merge(acoustic: Checkpoint, vocoder: Checkpoint, command: str | None = None) -> Checkpoint:
    """A checkpoint with the acoustic model of ``acoustic`` and the generator of ``vocoder``.

    Their configs must agree but for the generator's (``vocoder.config.vocoder`` is taken: a vocoder run may have
    changed generators). ``trained`` is true when both parts have trained steps; ``info`` keeps each part's record
    (``acoustic``, ``vocoder``), the data, and appends ``command`` to ``commands``.
    """
    config = dataclasses.replace(acoustic.config, vocoder=vocoder.config.vocoder)
    if config != vocoder.config:
        raise ValueError("the acoustic and vocoder checkpoints have different configs beyond the generator's")
    info = {**vocoder.info, **acoustic.info, "acoustic": part_info(acoustic, "acoustic"),
            "vocoder": part_info(vocoder, "vocoder")}
    commands = [*acoustic.info.get("commands", [])]
    commands += [c for c in vocoder.info.get("commands", []) if c not in commands]
    if command:
        commands.append(command)
    info["commands"] = commands
    trained = both_trained(info)
    info["name"] = "default" if trained else "partly-trained"
    return Checkpoint(config, acoustic.acoustic, vocoder.generator, trained, info)


def main(argv: Sequence[str] | None = None) -> int:
    m = argparse.ArgumentParser(prog="python -m tts_triton.training.merge",
                                description="Join the acoustic model of one checkpoint and the generator of another.")
    m.add_argument("--acoustic", type=Path, required=True)
    m.add_argument("--vocoder", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--half", action="store_true", help="store floating tensors as fp16 (the shipped form)")
    m.add_argument("--record", help="a command line to append to info['commands'] (e.g. the GPU run's)")
    args = m.parse_args(argv)
    merged = merge(load_checkpoint(args.acoustic), load_checkpoint(args.vocoder), args.record)
    merged.save(args.out, half=args.half)
    steps = {part: merged.info[part].get("steps", 0) for part in ("acoustic", "vocoder")}
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB, trained={merged.trained}, steps {steps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
