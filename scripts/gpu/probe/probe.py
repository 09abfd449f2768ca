"""In-process GPU probe: fp16 numerics vs fp32, graph vs eager timings, first chunk in process."""
import asyncio
import json
import os
import sys
import time

import numpy as np
import torch

from tts_triton import contract
from tts_triton.checkpoint import ASSETS, DEFAULT_CHECKPOINT, load_checkpoint
from tts_triton.evaluate import select_items
from tts_triton.serving.graphs import GraphBackend, StageRunner
from tts_triton.serving.pipeline import Pipeline
from tts_triton.text import text_to_sequences
from tts_triton.voices import VoiceBank

OUT = os.environ.get("OUT", "/tmp")
DEVICE = os.environ.get("DEVICE", "cuda")
N = int(os.environ.get("N", "50"))
CUDA = DEVICE == "cuda"


def sync():
    if CUDA:
        torch.cuda.synchronize()

results = {}


def log(*a):
    print(*a, flush=True)
    with open(f"{OUT}/probe.log", "a") as f:
        print(*a, file=f)


def dump():
    with open(f"{OUT}/probe.json", "w") as f:
        json.dump(results, f, indent=1)


ck = load_checkpoint(DEFAULT_CHECKPOINT)
cfg = ck.config
bank = VoiceBank.load(ASSETS / "voice_bank.json")
specs = contract.network_specs(cfg)
MAXB = {"text_encoder": 32, "style_encoder": 8, "decoder": 128, "vocoder": 32}


def runners(half, graphs):
    stages = ck.stages()
    rs = {n: StageRunner(stages[n], specs[n], device=DEVICE, half=half, max_batch_size=MAXB[n]) for n in specs}
    if graphs:
        t = time.time()
        counts = {n: r.warm_up() for n, r in rs.items()}
        log(f"captured {counts} in {time.time() - t:.1f} s; reserved "
            f"{torch.cuda.memory_reserved() / 1e9 if CUDA else 0:.2f} GB")
    return rs


eager = runners(False, False)
fast = runners(True, True)
results["graph_memory_reserved_gb"] = torch.cuda.memory_reserved() / 1e9 if CUDA else 0


def snr(a, b):
    return float(10 * np.log10((a**2).sum() / max(((a - b) ** 2).sum(), 1e-20)))


# 1. stop steps and vocoder SNR over the evaluation sentences
items = select_items(N)
same, diffs, snrs = 0, [], []
for it in items:
    ids = text_to_sequences(it.text)
    style = bank.style(it.voice, it.emotion)
    p32, p16 = Pipeline(GraphBackend(eager), cfg), Pipeline(GraphBackend(fast), cfg)
    a32, m32 = asyncio.run(p32.synthesize(ids, style))
    a16, m16 = asyncio.run(p16.synthesize(ids, style))
    s32, s16 = [s.steps for s in p32.stats], [s.steps for s in p16.stats]
    if s32 == s16:
        same += 1
        snrs.append(snr(a32, a16))
    else:
        diffs.append((it.sentence_id, s32, s16))
    # vocoder alone, fp16 graph vs fp32 eager, on the fp32 decoder's mel
    for start in range(0, max(1, len(m32) - 216), 216):
        w = m32[None, start:start + 216]
        if w.shape[1] == 216:
            v32 = eager["vocoder"].run([{"mel": w}])[0]["audio"]
            v16 = fast["vocoder"].run([{"mel": w}])[0]["audio"]
            results.setdefault("vocoder_window_snr", []).append(snr(v32, v16))
results["stop_same"] = same
results["stop_total"] = len(items)
results["stop_diffs"] = diffs
results["audio_snr_same_stop"] = snrs
vs = results.get("vocoder_window_snr", [])
log(f"stop step equal {same}/{len(items)}; diffs {diffs}; audio SNR median {np.median(snrs):.1f} min {min(snrs):.1f}; "
    f"vocoder window SNR median {np.median(vs):.1f} min {min(vs):.1f} ({len(vs)} windows)")
dump()


# 2. timings per call (wall clock incl. copies and sync)
def timeit(runner, feed, n=50):
    n = n if CUDA else 1
    runner.run([feed])
    sync()
    t = time.perf_counter()
    for _ in range(n):
        runner.run([feed])
    return (time.perf_counter() - t) / n * 1e3


rng = np.random.default_rng(0)
timing = {}
for tokens in (64, 256):
    for b in (1, 8, 64, 128):
        feed = {}
        for t in specs["decoder"].inputs:
            dims = [tokens if d == contract.TOKENS else d for d in t.dims]
            feed[t.name] = rng.standard_normal((b, *dims)).astype(np.float32) * 0.1
        feed["mask"] = np.ones((b, tokens), np.float32)
        timing[f"decoder T{tokens} B{b} graph16"] = timeit(fast["decoder"], feed)
        if b == 1:
            timing[f"decoder T{tokens} B{b} eager32"] = timeit(eager["decoder"], feed, 10)
for frames in (24, 216):
    for b in (1, 8, 32):
        feed = {"mel": rng.standard_normal((b, frames, cfg.n_mels)).astype(np.float32) - 6}
        timing[f"vocoder F{frames} B{b} graph16"] = timeit(fast["vocoder"], feed)
        if b == 1:
            timing[f"vocoder F{frames} B{b} eager32"] = timeit(eager["vocoder"], feed, 10)
for b in (1, 32):
    feed = {"phonemes": rng.integers(3, 60, (b, 64)).astype(np.int32), "mask": np.ones((b, 64), np.float32)}
    timing[f"text_encoder T64 B{b} graph16"] = timeit(fast["text_encoder"], feed)
    if b == 1:
        timing[f"text_encoder T64 B{b} eager32"] = timeit(eager["text_encoder"], feed, 10)
results["timing_ms"] = timing
for k, v in timing.items():
    log(f"{k:40s} {v:8.3f} ms")
dump()


# 3. in-process first chunk and RTF, batch 1
async def first_chunk(backend, text):
    pipeline = Pipeline(backend, cfg)
    t = time.perf_counter()
    first, samples = None, 0
    for c in [text_to_sequences(text)]:
        async for chunk in pipeline.stream(c, bank.style()):
            if first is None:
                first = time.perf_counter() - t
            samples += len(chunk.audio)
    total = time.perf_counter() - t
    return first * 1e3, total / (samples / 22050)


texts = ["Hello there.", "Please turn left at the next corner.", "Thanks for calling; we will be with you in a moment."]
for label, backend in (("eager32", GraphBackend(eager)), ("graph16", GraphBackend(fast))):
    rows = [asyncio.run(first_chunk(backend, t)) for t in texts * 3]
    fc = [r[0] for r in rows]
    rtf = [r[1] for r in rows]
    results[f"inproc_{label}"] = {"first_chunk_ms_p50": float(np.median(fc)), "rtf_mean": float(np.mean(rtf))}
    log(f"in-process {label}: first chunk p50 {np.median(fc):.2f} ms, RTF mean {np.mean(rtf):.4f}")
t = time.perf_counter()
for _ in range(20):
    text_to_sequences("Please turn left at the next corner.")
log(f"G2P one sentence {(time.perf_counter() - t) / 20 * 1e3:.2f} ms")
dump()
sys.exit(0)
