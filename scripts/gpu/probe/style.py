"""The served style encoder against the in-process fp32 one, and first chunks with reference audio against a preset.

Against a running server (``tts-triton serve``; any target) of ``--checkpoint`` (default: the default voice)::

    python scripts/gpu/probe/style.py REFERENCE.wav [--url localhost:8001] [--requests 20] [--checkpoint PT]

For prefixes of ``REFERENCE.wav`` (0.5 s, 1 s, all of it) it sends the reference mel to the ``style_encoder``
model and prints the cosine and the largest difference to the checkpoint's style encoder run here in fp32 (a GPU
target serves fp16); then the first-chunk p50 and max of ``--requests`` streams of one sentence, preset voice
against ``REFERENCE.wav`` as reference audio (one warm-up each, not counted).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
import tritonclient.grpc as grpcclient

from tts_triton.client import TTSClient
from tts_triton.core import audio, contract
from tts_triton.core.endpoints import DEFAULT_GRPC_URL
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint

SENTENCE = "The quick brown fox jumps over the lazy dog."


def style_lines(url: str, checkpoint: Path, wav: np.ndarray, rate: int) -> list[str]:
    """One line per reference prefix: the served style against ``checkpoint``'s, run here in fp32."""
    ckpt = load_checkpoint(checkpoint)
    stage = ckpt.stages()[contract.STYLE_ENCODER].eval()
    spec = contract.network_specs(ckpt.config)[contract.STYLE_ENCODER]
    lines = []
    with grpcclient.InferenceServerClient(url) as client:
        for seconds in (0.5, 1.0, len(wav) / rate):
            mel = audio.mel_spectrogram(audio.resample(wav[: int(seconds * rate)], rate)).astype(np.float32)
            request = grpcclient.InferInput(spec.inputs[0].name, [1, *mel.shape], "FP32")
            request.set_data_from_numpy(mel[None])
            served = client.infer(contract.STYLE_ENCODER, [request]).as_numpy(spec.outputs[0].name).reshape(-1)
            with torch.no_grad():
                local = stage(torch.from_numpy(mel[None]))[0].numpy().reshape(-1)
            cosine = float(served @ local / np.linalg.norm(served) / np.linalg.norm(local))
            lines.append(f"style of {seconds:.2f} s ({len(mel)} frames): cosine {cosine:.5f}, largest difference "
                         f"{np.abs(served - local).max():.4f}")
    return lines


def first_chunk_lines(url: str, wav: np.ndarray, rate: int, requests: int) -> list[str]:
    """First-chunk p50 and max (ms) of ``requests`` streams, preset voice and then reference audio."""
    lines = []
    with TTSClient(url) as tts:
        for label, options in (("preset voice", {}), ("reference audio", {"reference_audio": wav,
                                                                           "reference_sample_rate": rate})):
            firsts = []
            for _ in range(requests + 1):
                start = time.perf_counter()
                stream = tts.stream(SENTENCE, **options)
                next(stream)
                firsts.append((time.perf_counter() - start) * 1e3)
                stream.close()
            lines.append(f"{label}: first chunk p50 {np.median(firsts[1:]):.1f} ms, max {max(firsts[1:]):.1f} ms "
                         f"({requests} requests)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reference", help="a WAV (or any file soundfile reads) of speech")
    parser.add_argument("--url", default=DEFAULT_GRPC_URL, help="the server's gRPC address")
    parser.add_argument("--requests", type=int, default=20, help="streams per kind for the first-chunk times")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="the checkpoint the server serves")
    args = parser.parse_args(argv)
    wav, rate = sf.read(args.reference, dtype="float32", always_2d=True)
    wav = wav.mean(axis=1)
    for line in style_lines(args.url, args.checkpoint, wav, rate):
        print(line, flush=True)
    for line in first_chunk_lines(args.url, wav, rate, args.requests):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
