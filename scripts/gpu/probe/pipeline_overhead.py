"""The project's own Python on a stream's path, with the networks taken away: `TTSService.stream` (G2P, the request
checks, the decode loop, the fundamental track, the chunk planner) over an instant backend that returns tensors of
the contract's shapes at once. Runs on any host (CPU only), as the torch-cuda target serves (its K).

- Latency (default): medians over 300 requests of the bench's sentence mix, one at a time (the second decoder call of
  each sentence stops), time to the first chunk and to the end, with the calls made straight to the backend and
  through the BLS's :class:`~tts_triton.serving.coalesce.Coalescer`, in turns.
- Throughput (``--streams N``): N streams at once for ``--seconds``, each sentence decoded to about the trained
  voice's length (:data:`STEPS_PER_TOKEN`), its calls through the backends the BLS stacks (the Coalescer over the
  fundamental's estimate per merged request): this process's CPU time per second of audio made, the BLS's Python
  without its Triton hand-overs. Run it with one BLAS thread (``OPENBLAS_NUM_THREADS=1``), as the server runs it.

    python3 scripts/gpu/probe/pipeline_overhead.py [--requests 300] [--warmup 50]
    python3 scripts/gpu/probe/pipeline_overhead.py --streams 32 [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time

import numpy as np

from tts_triton.bench.workload import SENTENCES
from tts_triton.core import audio, contract
from tts_triton.core.config import ModelConfig
from tts_triton.core.voices import VoiceBank
from tts_triton.export.repository import RepositorySettings
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, DEFAULT_VOICE_BANK, load_checkpoint
from tts_triton.serving.coalesce import Coalescer
from tts_triton.serving.fundamentals import FundamentalBackend
from tts_triton.serving.pipeline import InferBackend
from tts_triton.serving.service import TTSService, parse_request

#: Decoder steps per phoneme token before a throughput stream's sentence stops: about the trained voice's rate.
STEPS_PER_TOKEN = 2


class InstantBackend:
    """Zero outputs of the contract's shapes (``specs``), at once (a decoder's mel: a fixed random log-mel, so that
    the fundamental's estimate sees frames); every second decoder call stops at its first step, or with
    ``lengths``, each row once it has run :data:`STEPS_PER_TOKEN` steps per token (counted in its attention
    state)."""

    def __init__(self, specs: dict[str, contract.ModelSpec], lengths: bool = False) -> None:
        self.specs = specs
        self.lengths = lengths
        self.decoder_calls = 0
        self.mels: dict[tuple[int, ...], np.ndarray] = {}

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        await asyncio.sleep(0)  # a real backend's call yields to the event loop
        sizes = {contract.TOKENS: inputs[contract.MASK].shape[1] if contract.MASK in inputs else 0,
                 contract.SAMPLES: inputs[contract.NET_MEL].shape[1] * audio.HOP_LENGTH
                 if contract.NET_MEL in inputs else 0}
        rows = len(next(iter(inputs.values())))
        out = {t.name: np.zeros((rows, *(sizes.get(d, d) for d in t.dims)), np.float32)
               for t in self.specs[model].outputs if t.name not in contract.DIAGNOSTIC_OUTPUTS}
        if contract.GATE not in out:
            return out
        shape = out[contract.NET_MEL].shape
        if shape not in self.mels:
            self.mels[shape] = (np.random.default_rng(0).random(shape) * -6.0).astype(np.float32)
        out[contract.NET_MEL] = self.mels[shape]
        self.decoder_calls += 1
        if not self.lengths:
            out[contract.GATE][:] = 1.0 if self.decoder_calls % 2 == 0 else -1.0
            return out
        done = inputs[contract.ATTENTION][:, 0, 0] + out[contract.GATE].shape[1]
        out[contract.ATTENTION + contract.STATE_OUT_SUFFIX][:, 0, 0] = done
        out[contract.GATE][:] = -1.0
        out[contract.GATE][done >= STEPS_PER_TOKEN * inputs[contract.MASK].sum(axis=1), -1] = 1.0  # its last step
        return out


def backend(cfg: ModelConfig, coalesced: bool) -> InferBackend:
    specs = contract.network_specs(cfg)
    if not coalesced:
        return InstantBackend(specs)
    rows = RepositorySettings.for_target("torch-cuda").max_batch_sizes()
    return Coalescer(InstantBackend(specs), specs, {name: rows[name] for name in specs})


def served_config() -> ModelConfig:
    """The shipped voice's config as the torch-cuda target serves it (its decoder steps per call)."""
    return RepositorySettings.for_target("torch-cuda").serving_config(load_checkpoint(DEFAULT_CHECKPOINT).config)


async def throughput(streams: int, seconds: float) -> tuple[float, float, int]:
    """(CPU ms of this process per audio second, x real time, requests) of ``streams`` streams for ``seconds``,
    stacked as the BLS stacks its backends."""
    cfg = served_config()
    service = TTSService(cfg, VoiceBank.load(DEFAULT_VOICE_BANK))
    service.warm_up()
    specs = {**contract.network_specs(cfg), **contract.ensemble_specs(cfg)}
    rows = RepositorySettings.for_target("torch-cuda").max_batch_sizes()
    open_streams = 0
    networks: InferBackend = InstantBackend(specs, lengths=True)
    if cfg.vocoder.harmonic:
        networks = FundamentalBackend(networks)
    coalesced = Coalescer(networks, specs, {name: rows[name] for name in specs if name in rows}, lambda: open_streams)
    samples = requests = 0
    ends = time.perf_counter() + seconds

    async def stream(first: int) -> None:
        nonlocal open_streams, samples, requests
        for i in itertools.count(first, streams):
            if time.perf_counter() >= ends:
                return
            request = parse_request({contract.TEXT: np.array([SENTENCES[i % len(SENTENCES)][1].encode()],
                                                             dtype=object)})
            open_streams += 1
            async for chunk in service.stream(request, coalesced):
                samples += len(chunk.audio)
            open_streams -= 1
            requests += 1

    cpu, began = time.process_time(), time.perf_counter()
    await asyncio.gather(*(stream(i) for i in range(streams)))
    cpu, wall, made = time.process_time() - cpu, time.perf_counter() - began, samples / audio.SAMPLE_RATE
    return 1e3 * cpu / made, made / wall, requests


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
    service = TTSService(served_config(), VoiceBank.load(DEFAULT_VOICE_BANK))
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
    parser.add_argument("--streams", type=int, default=0,
                        help="throughput: this many streams at once (default: the latency measurement)")
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput: for this long (default %(default)s)")
    args = parser.parse_args(argv)
    if args.streams:
        cpu_ms, speed, requests = asyncio.run(throughput(args.streams, args.seconds))
        print(f"instant backend, {args.streams} streams coalesced, {requests} requests: {cpu_ms:.3f} CPU ms per audio "
              f"second ({speed:.0f}x real time)")
        return 0
    for coalesced, (first, whole) in asyncio.run(measure(args.requests, args.warmup)).items():
        print(f"instant backend{', coalesced' if coalesced else ''}, medians of {args.requests}: first chunk "
              f"{first:.3f} ms, whole stream {whole:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
