"""The project's own Python on a stream's path to its first chunk, with the networks taken away: `TTSService.stream`
(G2P, the request checks, the decode loop, the chunk planner) over an instant backend that returns zero tensors of
the contract's shapes at once (the second decoder call of each sentence stops). Medians over 300 requests of the
bench's sentence mix, time to the first chunk and to the end. Runs on any host (CPU only).

    python3 scripts/gpu/probe/pipeline_overhead.py
"""

import asyncio
import time

import numpy as np

from tts_triton import contract
from tts_triton.bench.workload import SENTENCES
from tts_triton.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from tts_triton.export.repository import RepositorySettings
from tts_triton.serving.service import TTSService, parse_request
from tts_triton.voices import VoiceBank

cfg = RepositorySettings.for_target("torch-cuda").serving_config(load_checkpoint(DEFAULT_CHECKPOINT).config)
SPECS = contract.network_specs(cfg)


class InstantBackend:
    """Zero outputs of the contract's shapes, at once; every second decoder call stops at its first step."""

    def __init__(self) -> None:
        self.decoder_calls = 0

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        await asyncio.sleep(0)  # a real backend's call yields to the event loop
        sizes = {contract.TOKENS: inputs["mask"].shape[1] if "mask" in inputs else 0,
                 contract.SAMPLES: inputs["mel"].shape[1] * 256 if "mel" in inputs else 0}
        out = {t.name: np.zeros((1, *(sizes.get(d, d) for d in t.dims)), np.float32)
               for t in SPECS[model].outputs if t.name not in contract.DIAGNOSTIC_OUTPUTS}
        if model == contract.DECODER:
            self.decoder_calls += 1
            out["gate"][:] = 1.0 if self.decoder_calls % 2 == 0 else -1.0
        return out


async def one(service: TTSService, text: str) -> tuple[float, float]:
    began = time.perf_counter()
    request = parse_request({contract.TEXT: np.array([text.encode()], dtype=object)})
    chunks = service.stream(request, InstantBackend())
    await anext(chunks)
    first = time.perf_counter()
    async for _ in chunks:
        pass
    return (first - began) * 1e3, (time.perf_counter() - began) * 1e3


async def main() -> None:
    service = TTSService(cfg, VoiceBank.from_json(DEFAULT_CHECKPOINT.with_name("voice_bank.json").read_text()))
    service.warm_up()
    for i in range(50):
        await one(service, SENTENCES[i % len(SENTENCES)][1])
    times = [await one(service, SENTENCES[i % len(SENTENCES)][1]) for i in range(300)]
    first, whole = (sorted(t[k] for t in times)[len(times) // 2] for k in (0, 1))
    print(f"instant backend, medians of {len(times)}: first chunk {first:.3f} ms, whole stream {whole:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
