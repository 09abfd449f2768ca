"""The project's own Python on a stream's path to its first chunk, with the networks taken away: `TTSService.stream`
(G2P, the request checks, the decode loop, the chunk planner) over an instant backend that returns zero tensors of
the contract's shapes at once (the second decoder call of each sentence stops). Medians over 300 requests of the
bench's sentence mix, time to the first chunk and to the end, with the calls made straight to the backend and
through the BLS's :class:`~tts_triton.serving.coalesce.Coalescer`, in turns. Runs on any host (CPU only).

    python3 scripts/gpu/probe/pipeline_overhead.py [--requests 300] [--warmup 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

from tts_triton.bench.workload import SENTENCES
from tts_triton.core import contract
from tts_triton.core.config import ModelConfig
from tts_triton.core.voices import VoiceBank
from tts_triton.export.repository import RepositorySettings
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, DEFAULT_VOICE_BANK, load_checkpoint
from tts_triton.serving.coalesce import Coalescer
from tts_triton.serving.pipeline import InferBackend
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
        rows = len(next(iter(inputs.values())))
        out = {t.name: np.zeros((rows, *(sizes.get(d, d) for d in t.dims)), np.float32)
               for t in self.specs[model].outputs if t.name not in contract.DIAGNOSTIC_OUTPUTS}
        if model == contract.DECODER:
            self.decoder_calls += 1
            out[contract.GATE][:] = 1.0 if self.decoder_calls % 2 == 0 else -1.0
        return out


def backend(cfg: ModelConfig, coalesced: bool) -> InferBackend:
    specs = contract.network_specs(cfg)
    if not coalesced:
        return InstantBackend(specs)
    rows = RepositorySettings.for_target("torch-cuda").max_batch_sizes()
    return Coalescer(InstantBackend(specs), specs, {name: rows[name] for name in specs})


async def one(service: TTSService, text: str, coalesced: bool) -> tuple[float, float]:
    began = time.perf_counter()
    request = parse_request({contract.TEXT: np.array([text.encode()], dtype=object)})
    chunks = service.stream(request, backend(service.cfg, coalesced))
    await anext(chunks)
    first = time.perf_counter()
    async for _ in chunks:
        pass
    return (first - began) * 1e3, (time.perf_counter() - began) * 1e3


async def measure(requests: int, warmup: int) -> dict[bool, tuple[float, float]]:
    """Medians (first chunk, whole stream) in ms over ``requests`` streams after ``warmup`` unmeasured ones, by
    whether the calls go through the coalescer (the two alternate, request by request)."""
    # served as the torch-cuda target serves it: its decoder steps per call
    cfg = RepositorySettings.for_target("torch-cuda").serving_config(load_checkpoint(DEFAULT_CHECKPOINT).config)
    service = TTSService(cfg, VoiceBank.load(DEFAULT_VOICE_BANK))
    service.warm_up()
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(warmup + requests):
        for coalesced, measured in times.items():
            result = await one(service, SENTENCES[i % len(SENTENCES)][1], coalesced)
            if i >= warmup:
                measured.append(result)
    return {c: (statistics.median(t[0] for t in m), statistics.median(t[1] for t in m)) for c, m in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="measured streams (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured streams first (default %(default)s)")
    args = parser.parse_args(argv)
    for coalesced, (first, whole) in asyncio.run(measure(args.requests, args.warmup)).items():
        print(f"instant backend{', coalesced' if coalesced else ''}, medians of {args.requests}: first chunk "
              f"{first:.3f} ms, whole stream {whole:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
