"""Where a batch-1 network call's time goes in process: the graph replay alone against the whole
``StageRunner.run`` (request grouping, pinned copies in and out, replay, synchronisation, split), per network
at the first chunk's shapes (64 tokens, 48 frames), with the torch-cuda settings (fp16, K=16, batch budgets).
Each StageRunner.run is timed back to back and after 5 ms idle. Run it as an MPS client (CUDA_MPS_PIPE_DIRECTORY
of a running daemon) to see what MPS adds.

    python3 scripts/gpu/probe/overhead.py LABEL
"""

import os
import sys
import time

import numpy as np
import torch

from tts_triton import contract
from tts_triton.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from tts_triton.export.repository import RepositorySettings
from tts_triton.serving.graphs import StageRunner
from tts_triton.triton.torch_model import CUBLAS_WORKSPACE

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
settings = RepositorySettings.for_target("torch-cuda")
ck = load_checkpoint(DEFAULT_CHECKPOINT)
cfg = settings.serving_config(ck.config)
torch.backends.cudnn.benchmark = False
torch.cuda.set_device(0)
sizes = {contract.TOKENS: 64, contract.FRAMES: 48}
IDLE_S = 0.005  # a call after the host and the GPU idled this long, as between a stream's calls through Triton


def median_ms(call, n: int = 100, idle_s: float = 0.0) -> float:
    times = []
    for _ in range(n):
        time.sleep(idle_s)
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1e3)
    return sorted(times)[n // 2]


def measure(name: str, stage: torch.nn.Module) -> str:
    spec, net = contract.network_specs(cfg)[name], settings.networks[name]
    runner = StageRunner(stage, spec, device="cuda", half=True, max_batch_size=net.max_batch_size,
                         batch_budget=net.batch_budget)
    runner.warm_up()
    feed = {t.name: np.ones((1, *(sizes.get(d, d) for d in t.dims)), np.dtype(t.dtype)) for t in spec.inputs}
    graph = runner.calls[(1, tuple(feed[n].shape[1:] for n in spec.input_names))].graph

    def replay() -> None:
        graph.replay()
        torch.cuda.synchronize()

    replay_ms, run_ms = median_ms(replay), median_ms(lambda: runner.run([feed]))
    idle_ms = median_ms(lambda: runner.run([feed]), idle_s=IDLE_S)
    return (f"{name}: replay {replay_ms:.2f} ms, StageRunner.run {run_ms:.2f} ms, after {IDLE_S * 1e3:g} ms idle "
            f"{idle_ms:.2f} ms (medians of 100, batch 1)")


stages = ck.stages(cfg)
for network in (contract.TEXT_ENCODER, contract.DECODER, contract.VOCODER):
    print(sys.argv[1], measure(network, stages[network]), flush=True)
    torch.cuda.empty_cache()
