"""``tts_triton.bench`` end to end: one short run against the real embedded server, with the eager baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tts_triton.bench.sweep import main
from tts_triton.processes import memory


@pytest.mark.slow
def test_bench_against_the_embedded_server_with_a_cpu_baseline(tmp_path: Path) -> None:
    """One tiny run end to end: real tritonserver, the eager baseline in its child process (the soak shares
    run_level and the memory sampling with the levels, and would add ~5 s of idle waits). The grace is a bound,
    not a wait: in a clean-clone run on a machine loaded twice over the eager request was cut off after 60 s."""
    status = main(["--model-repository", str(tmp_path / "repo"), "--concurrency", "1", "2", "--client-processes", "2",
                   "--requests", "2", "--seconds", "1", "--grace", "240", "--warmup", "0", "--baseline-device", "cpu",
                   "--baseline-concurrency", "1", "--repeat-ratio", "0", "1", "--out", str(tmp_path / "out")])
    assert status == 0
    out = tmp_path / "out"
    text = (out / "BENCHMARKS.md").read_text()
    assert "| triton onnxruntime-python | 1 | 2 | 2 | 0 | 0 |" in text
    assert "| triton onnxruntime-python | 2 | 2 | 2 | 0 | 0 |" in text  # one measured request from each process
    assert "| eager cpu | 1 | 2 | 2 | 0 | 0 |" in text
    assert "(P = 1 at C = 1, 2 at C = 2)" in text
    assert "n/a: the server reports no `nv_gpu_memory_used_bytes`" in text
    jemalloc = memory.find_library(memory.ALLOCATORS["jemalloc"][0])
    assert f"- Allocator: {'jemalloc' if jemalloc else memory.GLIBC} (tritonserver's memory map)" in text
    data = json.loads((out / "bench.json").read_text())
    assert [m["label"] for m in data["report"]["memory"]] == ["start", "after R=0 c=1", "after R=0 c=2",
                                                               "after R=1 c=1", "after R=1 c=2", "end"]
    assert data["summaries"]["baseline"][0]["completed"] == 2
    levels = data["report"]["levels"]
    assert [(level["repeat_ratio"], level["clients"]) for level in levels] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    # the processes' requests on the level's clock: each process's two requests (opening, measured) in turn
    assert levels[1]["records"] and all(0 <= r["start"] < r["first_chunk"] < r["end"] for r in levels[1]["records"])
    # no utterance cache on this server, so no hit rate; at R=1 every request repeats a completed text (the opening
    # request's, and in the client processes those of the levels before)
    assert [s["repeat_pct"] for s in data["summaries"]["levels"]] == [0, 0, 100, 100]
    assert [s["cache_hit_pct"] for s in data["summaries"]["levels"]] == [None] * 4
    # the server's CPU per audio second, its BLS stubs part of it; the eager baseline has no server
    assert all(0 < s["bls_cpu_ms"] < s["server_cpu_ms"] for s in data["summaries"]["levels"])
    assert data["summaries"]["baseline"][0]["server_cpu_ms"] is None
    assert "### Server CPU per second of audio" in text
    assert (out / "concurrency.png").stat().st_size > 10_000
    assert "Started GRPCInferenceService" in (out / "tritonserver.log").read_text()
