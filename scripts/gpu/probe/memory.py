"""GPU memory of one network's process as the torch-cuda runtime holds it (run in a fresh process per setting).

    python3 scripts/gpu/probe/memory.py NETWORK MAX_BATCH [STEPS_PER_CALL]

Prints one line: the process's GPU memory (nvidia-smi) with the stage loaded (CUDA context, libraries, fp16
weights), after capturing its CUDA graphs for every batch bucket up to MAX_BATCH (as
:class:`~tts_triton.triton.torch_model.TritonPythonModel` does at load), torch's reserved bytes then, and the
median time of one graph replay (GPU only, no copies) at batch 1 and 16 of the first input shape. The
environment (``CUBLAS_WORKSPACE_CONFIG`` ...) applies as given.
"""

import dataclasses
import os
import subprocess
import sys
import time

import torch

from tts_triton import contract
from tts_triton.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from tts_triton.serving.graphs import StageRunner


def process_mib() -> int:
    rows = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    return sum(int(mib) for pid, mib in (r.split(", ") for r in rows) if int(pid) == os.getpid())


network, max_batch = sys.argv[1], int(sys.argv[2])
ck = load_checkpoint(DEFAULT_CHECKPOINT)
cfg = ck.config
if len(sys.argv) > 3:
    cfg = dataclasses.replace(cfg, decoder=dataclasses.replace(cfg.decoder, steps_per_call=int(sys.argv[3])))
torch.backends.cudnn.benchmark = False
torch.cuda.set_device(0)
runner = StageRunner(ck.stages(cfg)[network], contract.network_specs(cfg)[network], device="cuda", half=True,
                     max_batch_size=max_batch)
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
    for _ in range(60):
        began_replay = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - began_replay) * 1e3)
    replay_ms[batch] = sorted(times)[len(times) // 2]
workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "default")
print(f"{network} max_batch={max_batch} K={cfg.decoder.steps_per_call} cuBLAS workspace {workspace}: replay "
      f"{replay_ms[1]:.2f} / {replay_ms[16]:.2f} ms at batch 1 / 16 of {first}; ", end="")
print(f"{graphs} graphs in {time.time() - began:.1f} s; process {loaded} MiB loaded, {captured} MiB with graphs; "
      f"torch reserved {torch.cuda.memory_reserved() / 2**20:.0f} MiB", flush=True)
