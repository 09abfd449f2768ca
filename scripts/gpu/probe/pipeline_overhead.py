"""The project's own Python on a stream's path to its first chunk, with the networks taken away: `TTSService.stream`
(G2P, the request checks, the decode loop, the chunk planner) over an instant backend that returns zero tensors of
the contract's shapes at once (the second decoder call of each sentence stops). Medians over 300 requests of the
bench's sentence mix, time to the first chunk and to the end. Runs on any host (CPU only).

    python3 scripts/gpu/probe/pipeline_overhead.py [--requests 300] [--warmup 50]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from tts_triton.bench.workload import SENTENCES
from tts_triton.core import contract
from tts_triton.core.voices import VoiceBank
from tts_triton.export.repository import RepositorySettings
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, DEFAULT_VOICE_BANK, load_checkpoint
from tts_triton.serving.service import TTSService, parse_request


class InstantBackend:
    """Zero outputs of the contract's shapes (``specs``), at once; every second decoder call stops at its first
    step."""

    def __init__(self, specs: dict[str, contract.ModelSpec]) -> None:
        self.specs = specs
        self.decoder_calls = 0

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        await asyncio.sleep(0)  # a real backend's call yields to the event loop
        sizes = {contract.TOKENS: inputs[contract.MASK].shape[1] if contract.MASK in inputs else 0,
                 contract.SAMPLES: inputs[contract.NET_MEL].shape[1] * 256 if contract.NET_MEL in inputs else 0}
        out = {t.name: np.zeros((1, *(sizes.get(d, d) for d in t.dims)), np.float32)
               for t in self.specs[model].outputs if t.name not in contract.DIAGNOSTIC_OUTPUTS}
        if model == contract.DECODER:
            self.decoder_calls += 1
            out[contract.GATE][:] = 1.0 if self.decoder_calls % 2 == 0 else -1.0
        return out


async def one(service: TTSService, text: str) -> tuple[float, float]:
    began = time.perf_counter()
    request = parse_request({contract.TEXT: np.array([text.encode()], dtype=object)})
    chunks = service.stream(request, InstantBackend(contract.network_specs(service.cfg)))
    await anext(chunks)
    first = time.perf_counter()
    async for _ in chunks:
        pass
    return (first - began) * 1e3, (time.perf_counter() - began) * 1e3


async def measure(requests: int, warmup: int) -> tuple[float, float]:
    """Medians (first chunk, whole stream) in ms over ``requests`` streams after ``warmup`` unmeasured ones."""
    # served as the torch-cuda target serves it: its decoder steps per call
    cfg = RepositorySettings.for_target("torch-cuda").serving_config(load_checkpoint(DEFAULT_CHECKPOINT).config)
    service = TTSService(cfg, VoiceBank.load(DEFAULT_VOICE_BANK))
    service.warm_up()
    for i in range(warmup):
        await one(service, SENTENCES[i % len(SENTENCES)][1])
    times = [await one(service, SENTENCES[i % len(SENTENCES)][1]) for i in range(requests)]
    first, whole = (sorted(t[k] for t in times)[len(times) // 2] for k in (0, 1))
    return first, whole


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="measured streams (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured streams first (default %(default)s)")
    args = parser.parse_args(argv)
    first, whole = asyncio.run(measure(args.requests, args.warmup))
    print(f"instant backend, medians of {args.requests}: first chunk {first:.3f} ms, whole stream {whole:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
