"""In-process GPU probe of the vocoder stage (issue 12, run 5): graph replay time by batch and frames, the
kernels that take its time (eager, torch.profiler), and what cuDNN autotuning at capture would change."""
import time

import numpy as np
import torch

from tts_triton import contract
from tts_triton.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from tts_triton.serving.graphs import StageRunner

ck = load_checkpoint(DEFAULT_CHECKPOINT)
spec = contract.network_specs(ck.config)[contract.VOCODER]
FRAMES, BATCHES = (24, 96), (1, 8, 16, 32, 64)


def replay_table(tag: str, benchmark: bool) -> None:
    torch.backends.cudnn.benchmark = benchmark
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    runner = StageRunner(ck.stages()[contract.VOCODER], spec, device="cuda", half=True, max_batch_size=64)
    t = time.time()
    runner.warm_up()
    print(f"[{tag}] {len(runner.calls)} graphs in {time.time() - t:.1f} s, "
          f"+{(torch.cuda.memory_reserved() - before) / 2**20:.0f} MiB reserved", flush=True)
    rng = np.random.default_rng(0)
    for frames in FRAMES:
        row = []
        for b in BATCHES:
            feed = {"mel": (rng.standard_normal((b, frames, ck.config.n_mels)) - 5).astype(np.float32)}
            for _ in range(3):
                runner.run([feed])
            t = time.perf_counter()
            for _ in range(20):
                runner.run([feed])
            ms = (time.perf_counter() - t) / 20 * 1e3
            row.append(f"B{b} {ms:.2f} ms ({ms * 1e3 / (b * frames):.1f} us/frame)")
        print(f"[{tag}] frames {frames}: " + ", ".join(row), flush=True)
    del runner
    torch.backends.cudnn.benchmark = False


replay_table("fp16 graphs", benchmark=False)
replay_table("fp16 graphs, cudnn.benchmark at capture", benchmark=True)

stage = ck.stages()[contract.VOCODER].cuda().eval()
from tts_triton.models.stages import half_precision  # noqa: E402

half_precision(stage)
x = torch.randn(32, 96, ck.config.n_mels, device="cuda").half() - 5
with torch.inference_mode():
    for _ in range(3):
        stage(x)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            stage(x)
        torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=70), flush=True)
