"""``tts_triton.bench``: percentiles, statistics diffing, level summaries, GPU memory and cache lookups from Triton's
metrics, the eager-baseline ratios, goals from a file, report rendering, the load generator and its repeat-ratio
texts against scripted clients (tests/served/test_bench_embedded.py runs it against the real embedded server)."""

from __future__ import annotations

import asyncio
import math
import os
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from bench_data import level_result, model_stats

from tts_triton.bench.load import MIN_MEASURED, LoadLevel
from tts_triton.bench.stats import (
    CpuSample,
    LevelResult,
    diff_stats,
    flatten_stats,
    percentile,
    process_kind,
    server_cpu,
    summarize,
)
from tts_triton.bench.sweep import main
from tts_triton.bench.workload import SENTENCES, Workload
from tts_triton.processes.embedded import EmbeddedServer, bundle_install
from tts_triton.processes.triton_install import TritonNotFoundError


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_edge_cases() -> None:
    assert math.isnan(percentile([], 50))
    assert percentile([4.0], 99) == 4.0
    assert percentile([1.0, 2.0], 50) == 1.5


def test_flatten_stats_reads_strings_and_defaults_missing_counters_to_zero() -> None:
    flat = flatten_stats({"model_stats": [model_stats("decoder", 10, 4, 10, 1000, 5000),
                                          {"name": "encode", "version": "1", "inference_stats": {"success": {}}}]})
    assert flat["decoder"]["inference_count"] == 10
    assert flat["decoder"]["queue.ns"] == 1000
    assert flat["decoder"]["fail.count"] == 0
    assert flat["encode"]["execution_count"] == 0


def test_diff_stats_averages_per_request_and_per_execution() -> None:
    before = flatten_stats({"model_stats": [model_stats("decoder", 10, 10, 10, 10_000_000, 50_000_000)]})
    after = flatten_stats({"model_stats": [
        model_stats("decoder", 40, 16, 40, 70_000_000, 170_000_000),  # +30 requests in 6 executions
        model_stats("vocoder", 0, 0, 0, 0, 0),
        model_stats("tts_offline", 3, 3, 3, 0, 0),  # not a model the bench reports
    ]})
    deltas = {d.name: d for d in diff_stats(before, after)}
    assert list(deltas) == ["decoder", "vocoder"]
    decoder = deltas["decoder"]
    assert (decoder.requests, decoder.executions, decoder.failures) == (30, 6, 0)
    assert decoder.avg_batch == pytest.approx(5.0)
    assert decoder.queue_ms == pytest.approx(2.0)
    assert decoder.compute_ms == pytest.approx(4.0)
    vocoder = deltas["vocoder"]
    assert math.isnan(vocoder.avg_batch) and math.isnan(vocoder.queue_ms) and math.isnan(vocoder.compute_ms)


def test_summarize_separates_measured_fillers_opening_cutoffs_and_errors() -> None:
    s = summarize(level_result())
    assert (s.concurrency, s.measured, s.completed, s.errors, s.cut_off) == (2, 4, 2, 1, 1)
    # first-chunk latency of every measured request that got audio (the cut-off one included)
    assert s.first_chunk_p50 == pytest.approx(1000.0)
    assert s.first_chunk_p99 == pytest.approx(percentile([500.0, 1500.0, 1000.0], 99))
    # RTF over measured completed requests: 4/2 and 6/4
    assert s.rtf_mean == pytest.approx((2.0 + 1.5) / 2)
    # throughput counts all audio received and every completed stream, fillers and the opening burst included
    assert s.audio_per_second == pytest.approx(1.1)
    assert s.requests_per_second == pytest.approx(0.4)
    # the opening burst's first chunks, apart
    assert (s.opening_p50, s.opening_p99) == pytest.approx((2000.0, 2000.0))


def test_summarize_empty_level_gives_nan_not_errors() -> None:
    s = summarize(LevelResult(concurrency=1, records=[], loaded_seconds=0.0))
    assert s.measured == 0 and math.isnan(s.first_chunk_p50) and math.isnan(s.rtf_mean)
    assert math.isnan(s.audio_per_second)


class ScriptedClient:
    """Streams of fixed timing: the first chunk after ``first`` s, the end after ``total`` s (one chunk of 1 s)."""

    def __init__(self, first: float, total: float) -> None:
        self.first, self.total = first, total

    async def stream(self, text: str) -> AsyncIterator[Any]:
        await asyncio.sleep(self.first)
        yield SimpleNamespace(audio=np.zeros(22050, np.float32), sample_rate=22050)
        await asyncio.sleep(self.total - self.first)


def test_run_level_measures_after_each_workers_opening_request() -> None:
    level = asyncio.run(LoadLevel(ScriptedClient(0.01, 0.03), Workload(), concurrency=3, requests=6, seconds=60,
                                  grace=5).run())
    by_start = sorted(level.records, key=lambda r: r.start)
    assert [r.opening for r in by_start[:3]] == [True] * 3 and not any(r.opening for r in by_start[3:])
    assert not any(r.measured for r in by_start[:3])  # the burst of 3 streams opened at once
    assert sum(r.measured for r in level.records) == 6 and all(r.ok for r in level.records if r.measured)
    s = summarize(level)
    assert (s.measured, s.completed) == (6, 6)
    assert s.opening_p50 >= 10.0  # the opening streams' first chunks, which each took 10 ms or more


def test_uncapped_level_holds_its_window_and_measures_at_least_the_minimum() -> None:
    # 4 streams of 5 ms each for a 1 s window: about 800 starts, far more than the old cap of 8 x concurrency even
    # on a starved CI host (a 0.3 s window there got 32, the cap itself)
    level = asyncio.run(LoadLevel(ScriptedClient(0.001, 0.005), Workload(), concurrency=4, requests=None,
                                  seconds=1.0, grace=5).run())
    measured = sorted(r.start for r in level.records if r.measured)
    assert len(measured) > 8 * 4 and measured[-1] - measured[0] == pytest.approx(1.0, abs=0.1)
    slow = asyncio.run(LoadLevel(ScriptedClient(0.001, 0.002), Workload(), concurrency=1, requests=None,
                                 seconds=0.0, grace=5).run())
    assert sum(r.measured for r in slow.records) == MIN_MEASURED  # a window too short for a p99 still gets these


def test_cpu_by_process_kind_over_a_level(tmp_path: Path) -> None:
    stub = tmp_path / "stub"
    stub.write_bytes(b"/opt/python/triton_python_backend_stub\0/repo/decoder/1/model.py\0shm-key\0")
    server = tmp_path / "server"
    server.write_bytes(b"/opt/tritonserver/bin/tritonserver\0--model-repository\0/repo\0")
    assert (process_kind(stub), process_kind(server), process_kind(tmp_path / "gone")) == (
        "stub decoder", "tritonserver", "?")
    before = CpuSample(total=0, idle=0, steal=0, own=0, processes={"stub decoder": {10: 100, 11: 50}})
    after = CpuSample(total=4000, idle=0, steal=0, own=0,
                      processes={"stub decoder": {10: 900, 11: 450}, "tritonserver": {1: 300}})
    # 4,000 ticks over 4 CPUs: 1,000 ticks are one core
    assert CpuSample.by_process(before, after, cpus=4) == {"stub decoder": (2, 120.0), "tritonserver": (1, 30.0)}
    assert CpuSample.by_process(None, after) == {}
    live = CpuSample.read()
    assert live is not None and "bench client" in live.processes  # this process counts as the client


def test_server_cpu_per_audio_second_by_process_group() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    before = CpuSample(total=0, idle=0, steal=0, own=0, processes={"stub tts": {10: tick}})
    after = CpuSample(total=1, idle=0, steal=0, own=0, processes={
        "stub tts": {10: 3 * tick, 12: tick}, "stub tts_offline": {13: tick}, "stub decoder": {20: 2 * tick},
        "stub vocoder": {21: tick}, "tritonserver": {1: tick}, "nvidia-cuda-mps-server": {2: tick},
        "bench client": {3: 9 * tick}})
    seconds = CpuSample.seconds_by_kind(before, after)
    assert seconds["stub tts"] == pytest.approx(3.0)  # pid 10 from 1 s, pid 12 new
    assert server_cpu(seconds) == pytest.approx({"server": 9.0, "BLS": 4.0, "networks": 3.0, "tritonserver": 1.0})
    assert server_cpu({"bench client": 1.0}) == {}  # a server the bench did not start: not known
    level = level_result()  # 11 s of audio received, fillers' and the cut-off stream's included
    level.cpu_seconds = seconds
    s = summarize(level)
    assert (s.server_cpu_ms, s.bls_cpu_ms, s.networks_cpu_ms, s.tritonserver_cpu_ms) == pytest.approx(
        (9_000 / 11, 4_000 / 11, 3_000 / 11, 1_000 / 11))
    assert math.isnan(summarize(level_result()).server_cpu_ms)


def test_cpu_usage() -> None:
    busy, steal, own = CpuSample.usage(CpuSample(total=1000, idle=400, steal=0, own=100),
                                       CpuSample(total=1200, idle=450, steal=10, own=200))
    assert (busy, steal, own) == pytest.approx((75.0, 5.0, 50.0))
    assert all(math.isnan(v) for v in CpuSample.usage(None, CpuSample(1, 1, 0, 0)))


def test_bench_refuses_a_cuda_baseline_without_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    assert main(["--baseline-device", "cuda"]) == 2
    assert "--baseline-device cuda: no CUDA here" in capsys.readouterr().err


def test_bundle_install_names_what_is_missing_and_its_server_keeps_libdir_off_the_library_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TritonNotFoundError, match="stub/triton_python_backend_stub"):
        bundle_install(tmp_path)
    for name in ("bin/tritonserver", "stub/triton_python_backend_stub", "backends/python/libtriton_python.so",
                 "backends/python/triton_python_backend_utils.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    (tmp_path / "libs").mkdir()
    (tmp_path / "caches").mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/pylib")
    server = EmbeddedServer(tmp_path, install=bundle_install(tmp_path), environment={"TTS_EXAMPLE": "1"})
    assert server.environment()["TTS_EXAMPLE"] == "1"
    assert server.environment()["LD_LIBRARY_PATH"] == f"{tmp_path / 'libs'}{os.pathsep}/opt/pylib"
    assert sysconfig.get_config_var("LIBDIR") not in server.environment()["LD_LIBRARY_PATH"].split(os.pathsep)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert server.environment()["OPENBLAS_NUM_THREADS"] == "1"  # one BLAS thread per stub by default
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert server.environment()["OPENBLAS_NUM_THREADS"] == "4"  # the caller's own setting wins


def test_bench_refuses_a_gpu_target_without_cuda(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    assert main(["--target", "torch-cuda", "--baseline-device", "none", "--model-repository",
                 str(tmp_path / "repo")]) == 2
    assert "--target torch-cuda needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "repo").exists()  # refused before building anything


def test_a_level_reports_its_repeats_and_cache_hit_rate() -> None:
    level = level_result()
    level.repeat_ratio, level.cache = 0.5, {"hit": 3, "miss": 1, "error": 0}
    level.records[1].repeat = True
    s = summarize(level)
    assert (s.repeat_pct, s.cache_hit_pct) == (25.0, 75.0)
    plain = summarize(level_result())
    assert math.isnan(plain.repeat_pct) and math.isnan(plain.cache_hit_pct)


def test_workload_cycles_the_sentences_without_a_repeat_ratio() -> None:
    workload = Workload()
    drawn = [workload.next() for _ in range(8)]
    assert [text for _, text, _ in drawn] == [text for _, text in SENTENCES] + [SENTENCES[0][1], SENTENCES[1][1]]
    assert not any(repeat for _, _, repeat in drawn)


def test_workload_repeats_only_completed_texts_at_the_ratio() -> None:
    workload = Workload(0.8, seed=1, code_start=0)
    index, first, repeat = workload.next()
    assert (index, first, repeat) == (0, "Hello there. Alpha alpha alpha alpha.", False)
    assert not workload.next()[2]  # nothing completed yet: new texts only
    workload.completed(first)
    drawn = [workload.next() for _ in range(500)]
    repeats = [text for _, text, repeat in drawn if repeat]
    assert set(repeats) == {first}
    assert 0.75 < len(repeats) / len(drawn) < 0.85
    fresh = [text for _, text, repeat in drawn if not repeat]
    assert len(set(fresh)) == len(fresh) and first not in fresh  # every new text is new
    assert all(text.startswith(SENTENCES[i % len(SENTENCES)][1]) for i, text, repeat in drawn if not repeat)
    never = Workload(0.0, code_start=0)
    never.completed("Hello there.")
    assert not any(never.next()[2] for _ in range(50))
    with pytest.raises(ValueError, match="within 0-1"):
        Workload(1.5)


class RecordingClient(ScriptedClient):
    """A scripted client that records the texts it was asked to speak."""

    def __init__(self, first: float, total: float) -> None:
        super().__init__(first, total)
        self.texts: list[str] = []

    async def stream(self, text: str) -> AsyncIterator[Any]:
        self.texts.append(text)
        async for chunk in super().stream(text):
            yield chunk


def test_load_level_sends_the_workloads_texts_and_marks_repeats() -> None:
    client = RecordingClient(0.001, 0.002)
    level = asyncio.run(LoadLevel(client, Workload(1.0, code_start=0), concurrency=2, requests=10, seconds=60,
                                  grace=5).run())
    assert level.repeat_ratio == 1.0
    assert [r.text for r in sorted(level.records, key=lambda r: r.index)] == client.texts
    assert not level.records[0].repeat  # the first text is new; once one completed, every request repeats it
    assert sum(r.repeat for r in level.records if r.measured) == 10


def test_progress_line_rate_limits_and_always_prints_the_end() -> None:
    import io

    from tts_triton.jobs.progress import ProgressLine

    time = SimpleNamespace(now=0.0)
    stream = io.StringIO()
    progress = ProgressLine("synthesize", total=4, every=10.0, stream=stream, clock=lambda: time.now)
    time.now = 1.0
    progress.advance()  # within 10 s of the start: not printed
    time.now = 20.0
    progress.advance(detail="2 in flight")  # printed, with an ETA of 20 s
    time.now = 21.0
    progress.advance(2)  # the end: printed
    assert stream.getvalue().splitlines() == ["synthesize: 2/4, 20 s, ETA 20 s; 2 in flight", "synthesize: 4/4, 21 s"]


def test_quick_fills_in_the_short_levels_and_explicit_options_win() -> None:
    from tts_triton.bench.sweep import QUICK, STANDARD, parse

    plain, quick = parse([]), parse(["--quick", "--seconds", "2"])
    assert (plain.concurrency, plain.seconds, plain.grace) == (STANDARD["concurrency"], 30.0, 90.0)
    assert (quick.concurrency, quick.seconds, quick.grace) == (QUICK["concurrency"], 2.0, QUICK["grace"])
    assert parse(["--repository-setting", "bls_instances=2", "--server-env", "A=b=c"]).server_env == [("A", "b=c")]
    pool = "--backend-config=python,thread-pool-size=64"
    assert parse([f"--server-arg={pool}", "--server-arg=--log-verbose=1"]).server_arg == [pool, "--log-verbose=1"]
    with pytest.raises(SystemExit):
        parse(["--repeat-ratio", "1.5"])


def test_speech_controls_reach_every_stream_and_are_range_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from tts_triton.bench.load import ControlledClient
    from tts_triton.bench.sweep import parse

    args = parse(["--speed", "1.25", "--volume", "-3"])
    assert (args.speed, args.pitch, args.volume) == (1.25, None, -3.0)
    with pytest.raises(SystemExit):
        parse(["--pitch", "13"])
    assert "--pitch 13 is outside -12 to 12 st" in capsys.readouterr().err

    class Recording:
        def __init__(self) -> None:
            self.calls: list[tuple[str, dict[str, float]]] = []

        def stream(self, text: str, **controls: float) -> str:
            self.calls.append((text, controls))
            return text

    inner = Recording()
    assert ControlledClient(inner, speed=1.25).stream("Hi.") == "Hi."
    assert inner.calls == [("Hi.", {"speed": 1.25})]


def test_bench_refuses_an_unknown_repository_setting_and_a_bad_goals_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--repository-setting", "no_such_setting=1", "--baseline-device", "none",
                 "--model-repository", str(tmp_path / "repo"), "--out", str(tmp_path / "out")]) == 2
    assert "no_such_setting" in capsys.readouterr().err
    assert not (tmp_path / "repo").exists()  # refused before building anything
    (tmp_path / "goals.toml").write_text("[speed]\nat_least = 1\n")
    assert main(["--goals", str(tmp_path / "goals.toml"), "--baseline-device", "none"]) == 2
    assert "unknown goal 'speed'" in capsys.readouterr().err
