"""GPU memory and graph replay time of one network's process as the torch-cuda runtime holds it.

    python3 scripts/gpu/probe/memory.py NETWORK MAX_BATCH [--steps-per-call K]

Prints one line: the process's GPU memory (nvidia-smi) with the stage loaded (CUDA context, libraries, fp16
weights), after capturing its CUDA graphs for every batch bucket up to MAX_BATCH (as
:class:`~tts_triton.triton.torch_model.TritonPythonModel` does at load), torch's reserved bytes then, and the
median time of one graph replay (GPU only, no copies) at batch 1 and 16 of the first input shape. Run one
setting per process (memory is the process's); the environment (``CUBLAS_WORKSPACE_CONFIG`` ...) applies as given.
Needs a CUDA GPU; elsewhere it says so and exits with 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time

from tts_triton.core import contract

REPLAYS = 60  # per batch size: the median of this many is stable to ~1 %


def process_mib() -> int:
    """This process's GPU memory as nvidia-smi reports it, MiB."""
    rows = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    return sum(int(mib) for pid, mib in (r.split(", ") for r in rows) if int(pid) == os.getpid())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("network", choices=(contract.TEXT_ENCODER, contract.DECODER, contract.VOCODER,
                                            contract.STYLE_ENCODER))
    parser.add_argument("max_batch", type=int, help="the largest batch bucket captured")
    parser.add_argument("--steps-per-call", type=int, help="decoder steps per call (default: the checkpoint's)")
    args = parser.parse_args(argv)
    import torch  # heavy: after --help

    from tts_triton.engine.graphs import StageRunner
    from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint

    if not torch.cuda.is_available():
        print("memory.py: needs a CUDA GPU, and torch sees none here", file=sys.stderr)
        return 2
    ck = load_checkpoint(DEFAULT_CHECKPOINT)
    cfg = ck.config
    if args.steps_per_call:
        cfg = dataclasses.replace(cfg, decoder=dataclasses.replace(cfg.decoder, steps_per_call=args.steps_per_call))
    torch.backends.cudnn.benchmark = False
    torch.cuda.set_device(0)
    runner = StageRunner(ck.stages(cfg)[args.network], contract.network_specs(cfg)[args.network], device="cuda",
                         half=True, max_batch_size=args.max_batch)
    torch.cuda.synchronize()
    loaded = process_mib()
    began = time.time()
    graphs = runner.warm_up()
    captured = process_mib()
    first = runner.graph_shapes()[0]
    replay_ms = {}
    for batch in (1, 16):
        graph = runner.calls[(batch, first)].graph
        times = []
        for _ in range(REPLAYS):
            began_replay = time.perf_counter()
            graph.replay()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - began_replay) * 1e3)
        replay_ms[batch] = sorted(times)[len(times) // 2]
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "default")
    print(f"{args.network} max_batch={args.max_batch} K={cfg.decoder.steps_per_call} cuBLAS workspace {workspace}: "
          f"replay {replay_ms[1]:.2f} / {replay_ms[16]:.2f} ms at batch 1 / 16 of {first}; {graphs} graphs in "
          f"{time.time() - began:.1f} s; process {loaded} MiB loaded, {captured} MiB with graphs; torch reserved "
          f"{torch.cuda.memory_reserved() / 2**20:.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
