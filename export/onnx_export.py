"""Export a checkpoint's four inference stages to ONNX, one file per Triton model.

Inputs, outputs and dynamic axes come from :mod:`tts_triton.core.contract`; axis 0 of every tensor is
the dynamic batch axis. The decoder graph is K unrolled steps (no ONNX Loop). Every file passes
``onnx.checker`` and shape inference.

    python -m tts_triton.export.onnx_export --out build/onnx [--checkpoint ckpt.pt] [--opset 17]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import onnx
import torch

from tts_triton.core import contract
from tts_triton.models.checkpoint import UNTRAINED_LABEL, Checkpoint, resolve

OPSET = 17
#: Sizes used for the dynamic axes while tracing (any value works; distinct primes catch mix-ups).
TRACE_SIZES = {contract.TOKENS: 37, contract.FRAMES: 23, contract.REF_FRAMES: 61}
TRACE_BATCH = 2


def example_inputs(spec: contract.ModelSpec, batch: int = TRACE_BATCH, sizes: dict[str, int] | None = None,
                   seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs shaped like ``spec`` (phonemes are valid ids, masks are all-valid)."""
    sizes = {**TRACE_SIZES, **(sizes or {})}
    g = torch.Generator().manual_seed(seed)
    out = {}
    for t in spec.inputs:
        shape = (batch, *(sizes[d] if isinstance(d, str) else d for d in t.dims))
        if t.dtype == "int32":
            out[t.name] = torch.randint(1, 100, shape, generator=g, dtype=torch.int32)
        elif t.name == contract.MASK:
            out[t.name] = torch.ones(shape)
        elif t.name.startswith("attention_weights"):
            out[t.name] = torch.softmax(torch.randn(shape, generator=g), dim=-1)
        else:
            out[t.name] = torch.randn(shape, generator=g)
    return out


def dynamic_axes(spec: contract.ModelSpec) -> dict[str, dict[int, str]]:
    axes = {}
    for t in spec.inputs + spec.outputs:
        axes[t.name] = {0: "batch", **{i + 1: d for i, d in enumerate(t.dims) if isinstance(d, str)}}
    return axes


def export_stage(stage: torch.nn.Module, spec: contract.ModelSpec, path: Path, opset: int = OPSET) -> Path:
    """Trace one stage to ``path`` and check the result."""
    inputs = example_inputs(spec)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        # GRU export warns about batch sizes other than 1 even though h0 is passed explicitly.
        warnings.filterwarnings("ignore", message=".*batch_size other than 1.*GRU", category=UserWarning)
        torch.onnx.export(stage, tuple(inputs[n] for n in spec.input_names), str(path), dynamo=False,
                          input_names=spec.input_names, output_names=spec.output_names,
                          dynamic_axes=dynamic_axes(spec), opset_version=opset, do_constant_folding=True)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return path


def export_checkpoint(ckpt: Checkpoint, out_dir: Path, opset: int = OPSET, progress: bool = True) -> dict[str, Path]:
    """Write ``<out_dir>/<model>.onnx`` for the four networks -> paths keyed by model name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stages = ckpt.stages()
    specs = contract.network_specs(ckpt.config)
    paths = {}
    for i, (name, spec) in enumerate(specs.items(), 1):
        start = time.perf_counter()
        paths[name] = export_stage(stages[name], spec, out_dir / f"{name}.onnx", opset)
        if progress:
            size = paths[name].stat().st_size / 1e6
            print(f"[{i}/{len(specs)}] {name}.onnx  {size:.1f} MB  {time.perf_counter() - start:.1f} s", flush=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--out", type=Path, required=True, help="output directory for the .onnx files")
    parser.add_argument("--opset", type=int, default=OPSET)
    args = parser.parse_args(argv)
    ckpt = resolve(args.checkpoint)
    if not ckpt.trained:
        print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
    export_checkpoint(ckpt, args.out, args.opset)
    return 0


__all__ = ["OPSET", "example_inputs", "export_checkpoint", "export_stage", "main"]

if __name__ == "__main__":
    sys.exit(main())
