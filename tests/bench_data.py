"""Scripted numbers for the bench's tests: a model's Triton statistics and a level's request records."""

from __future__ import annotations

from tts_triton.bench.stats import LevelResult
from tts_triton.bench.workload import RequestRecord


def model_stats(name: str, inferences: int, executions: int, success: int, queue_ns: int, infer_ns: int) -> dict:
    """One entry of get_inference_statistics(as_json=True) as the gRPC client returns it (numbers as strings)."""
    return {
        "name": name, "version": "1", "inference_count": str(inferences), "execution_count": str(executions),
        "inference_stats": {
            "success": {"count": str(success), "ns": str(queue_ns + infer_ns)}, "fail": {},
            "queue": {"count": str(success), "ns": str(queue_ns)},
            "compute_input": {"count": str(success), "ns": "0"},
            "compute_infer": {"count": str(success), "ns": str(infer_ns)},
            "compute_output": {"count": str(success), "ns": "0"},
        },
    }



def level_result() -> LevelResult:
    records = [
        RequestRecord(index=0, measured=True, start=0.0, first_chunk=0.5, end=4.0, audio_seconds=2.0, chunks=3),
        RequestRecord(index=1, measured=True, start=0.0, first_chunk=1.5, end=6.0, audio_seconds=4.0, chunks=5),
        RequestRecord(index=2, measured=True, start=4.0, first_chunk=5.0, audio_seconds=1.0, chunks=1),  # cut off
        RequestRecord(index=3, measured=True, start=6.0, error="TTSError: boom"),
        RequestRecord(index=4, measured=False, start=6.5, first_chunk=6.6, end=9.0, audio_seconds=3.0, chunks=2),
        RequestRecord(index=5, measured=False, start=0.0, opening=True, first_chunk=2.0, end=3.0, audio_seconds=1.0,
                      chunks=1),
    ]
    return LevelResult(concurrency=2, records=records, loaded_seconds=10.0, cpu_busy=90.0, cpu_steal=1.0,
                       cpu_own=60.0)
