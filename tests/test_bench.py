"""``tts_triton.bench``: percentiles, statistics diffing, level summaries, GPU memory and cache lookups from Triton's
metrics, the eager-baseline ratios, goals from a file, report rendering, the load generator and its repeat-ratio
texts against scripted clients; and one short run against the real embedded server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tts_triton.bench.baseline import BaselinePlan, run_baseline
from tts_triton.bench.compare import compare
from tts_triton.bench.goals import Goals, GoalsError, RunNumbers
from tts_triton.bench.load import MIN_MEASURED, LoadLevel
from tts_triton.bench.plot import plot
from tts_triton.bench.prometheus import cache_lookups, gpu_memory_bytes
from tts_triton.bench.report import (
    LEVEL_HEADERS,
    MODEL_HEADERS,
    RATIO_HEADERS,
    Report,
    ratio_row,
    reference_level,
    render_markdown,
    report_json,
)
from tts_triton.bench.stats import (
    CpuSample,
    LevelResult,
    LevelSummary,
    MemorySample,
    MemoryTrend,
    baseline_pairs,
    best_level,
    diff_stats,
    flatten_stats,
    percentile,
    summarize,
)
from tts_triton.bench.sweep import main
from tts_triton.bench.workload import SENTENCES, RequestRecord, Workload
from tts_triton.jobs.tables import markdown_table, text_table
from tts_triton.ops.embedded import EmbeddedServer, bundle_install
from tts_triton.ops.triton_install import TritonNotFoundError


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_edge_cases() -> None:
    assert math.isnan(percentile([], 50))
    assert percentile([4.0], 99) == 4.0
    assert percentile([1.0, 2.0], 50) == 1.5


def _model(name: str, inferences: int, executions: int, success: int, queue_ns: int, infer_ns: int) -> dict:
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


def test_flatten_stats_reads_strings_and_defaults_missing_counters_to_zero() -> None:
    flat = flatten_stats({"model_stats": [_model("decoder", 10, 4, 10, 1000, 5000),
                                          {"name": "encode", "version": "1", "inference_stats": {"success": {}}}]})
    assert flat["decoder"]["inference_count"] == 10
    assert flat["decoder"]["queue.ns"] == 1000
    assert flat["decoder"]["fail.count"] == 0
    assert flat["encode"]["execution_count"] == 0


def test_diff_stats_averages_per_request_and_per_execution() -> None:
    before = flatten_stats({"model_stats": [_model("decoder", 10, 10, 10, 10_000_000, 50_000_000)]})
    after = flatten_stats({"model_stats": [
        _model("decoder", 40, 16, 40, 70_000_000, 170_000_000),  # +30 requests in 6 executions
        _model("vocoder", 0, 0, 0, 0, 0),
        _model("tts_offline", 3, 3, 3, 0, 0),  # not a model the bench reports
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


def _level() -> LevelResult:
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


def test_summarize_separates_measured_fillers_opening_cutoffs_and_errors() -> None:
    s = summarize(_level())
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
    # 4 streams of 5 ms each for a 0.3 s window: about 240 starts, far more than the old cap of 8 x concurrency
    level = asyncio.run(LoadLevel(ScriptedClient(0.001, 0.005), Workload(), concurrency=4, requests=None,
                                  seconds=0.3, grace=5).run())
    measured = sorted(r.start for r in level.records if r.measured)
    assert len(measured) > 8 * 4 and measured[-1] - measured[0] == pytest.approx(0.3, abs=0.1)
    slow = asyncio.run(LoadLevel(ScriptedClient(0.001, 0.002), Workload(), concurrency=1, requests=None,
                                 seconds=0.0, grace=5).run())
    assert sum(r.measured for r in slow.records) == MIN_MEASURED  # a window too short for a p99 still gets these


def test_cpu_usage() -> None:
    busy, steal, own = CpuSample.usage(CpuSample(total=1000, idle=400, steal=0, own=100),
                                       CpuSample(total=1200, idle=450, steal=10, own=200))
    assert (busy, steal, own) == pytest.approx((75.0, 5.0, 50.0))
    assert all(math.isnan(v) for v in CpuSample.usage(None, CpuSample(1, 1, 0, 0)))


def test_markdown_table_aligns_numbers_right_and_escapes_pipes() -> None:
    table = markdown_table(("name", "n"), [["a|b", "1"]]).splitlines()
    assert table == ["| name | n |", "|---|---:|", "| a\\|b | 1 |"]
    assert markdown_table(("a", "b", "c"), [], left=2).splitlines()[1] == "|---|---|---:|"


def test_text_table_pads_columns() -> None:
    lines = text_table(("model", "ms"), [["decoder", "1.5"], ["tts", "10.25"]]).splitlines()
    assert lines[0] == "model       ms"
    assert lines[2] == "decoder    1.5"
    assert lines[3] == "tts      10.25"


def _report(trained: bool | None) -> Report:
    level = _level()
    level.models = diff_stats({}, flatten_stats({"model_stats": [_model("vocoder", 8, 2, 8, 8_000_000, 0)]}))
    return Report(date="2026-01-01 00:00 UTC", command="tts-triton bench", machine=[("CPU", "test cpu")],
                  server=[("Triton", "triton 2.51.0")], trained=trained,
                  settings={"vocoder": {"max_batch_size": 16, "max_queue_delay_us": 2000, "instances": 1}},
                  levels=[level], sentences=[("short", "Hello.", "9", "2.00", "2.00")],
                  plot="docs/records/bench/concurrency.png", warmup=2, seconds=60.0, grace=120.0)


def test_render_markdown_has_every_section() -> None:
    text = render_markdown(_report(trained=True))
    assert "```\ntts-triton bench\n```" in text
    assert "- CPU: test cpu" in text
    assert "| " + " | ".join(LEVEL_HEADERS) + " |" in text
    assert "| " + " | ".join(MODEL_HEADERS) + " |" in text
    assert "| vocoder | 8 | 8 | 0 | 2 | 4.00 | 1.00 | 0.00 |" in text
    assert "| vocoder | 16 | 2000 | 1 | – | – | – |" in text  # settings: no batch budget, threads not given
    assert "### Opening burst" in text and "| triton | 2 | 2,000.0 | 2,000.0 |" in text
    assert "![latency and throughput against concurrency](docs/records/bench/concurrency.png)" in text
    assert "`TTSError: boom`" in text
    assert "- Shared: during the levels other processes used 30-30 % of all cores, CPU steal time 1-1 %" in text
    assert "UNTRAINED" not in text
    assert "not in this run" not in text


def test_compare_pairs_the_levels_both_runs_share() -> None:
    before, after = _report(trained=True), _report(trained=True)
    after.levels[0].records = [dataclasses.replace(r, first_chunk=r.first_chunk and r.start + (r.first_chunk - r.start)
                                                   / 2) for r in after.levels[0].records]
    after.levels[0].models = diff_stats({}, flatten_stats({"model_stats": [_model("vocoder", 8, 2, 2, 8_000_000, 0)]}))
    extra = _level()
    extra.concurrency = 4  # only in the later run: not compared
    after.levels.append(extra)
    text = compare(json.loads(report_json(before)), json.loads(report_json(after)), ("main", "new"))
    assert text.startswith("Each cell: main → new (new / main).")
    assert "| 2 | 1,000.0 → 500.0 (0.50x) |" in text
    assert "| 4 |" not in text
    assert "| 2 | vocoder | 8 → 2 | 8 → 8 | 2 → 2 |" in text


def test_render_markdown_flags_uneven_other_load() -> None:
    report = _report(trained=True)
    quiet = LevelResult(concurrency=1, records=[], loaded_seconds=1.0, cpu_busy=50.0, cpu_steal=0.0, cpu_own=50.0)
    report.levels.insert(0, quiet)  # 0 % others here, 30 % in the other level
    assert "**but not in this run**: other processes took 0 to 30 %" in render_markdown(report)


@pytest.mark.parametrize(("trained", "phrase"), [(False, "UNTRAINED"), (None, "does not say whether its weights")])
def test_render_markdown_warns_about_untrained_weights(trained: bool | None, phrase: str) -> None:
    text = render_markdown(_report(trained))
    assert phrase in text.split("## Machine")[0]


#: /metrics of the embedded CPU server serving this project's repository (captured from a real tritonserver 2.51).
CPU_METRICS = (Path(__file__).parent / "data" / "triton_metrics_cpu.txt").read_text()
#: Triton's GPU memory gauges in its exposition format, as a server with two GPUs adds them to the page.
GPU_LINES = """# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-0a"} 150754820096
nv_gpu_memory_total_bytes{gpu_uuid="GPU-1b"} 150754820096
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-0a"} 2147483648
nv_gpu_memory_used_bytes{gpu_uuid="GPU-1b"} 1.073741824e+09
"""


def test_gpu_memory_is_none_on_a_real_cpu_servers_metrics_page() -> None:
    assert "nv_cpu_memory_used_bytes" in CPU_METRICS  # the page is real and has other memory gauges
    assert gpu_memory_bytes(CPU_METRICS) is None


def test_gpu_memory_sums_used_bytes_over_gpus_only() -> None:
    assert gpu_memory_bytes(CPU_METRICS + GPU_LINES) == 3 * 2**30


def test_memory_trend_skips_samples_without_a_value() -> None:
    samples = [MemorySample("start", 0.0, None), MemorySample("after c=1", 5.0, 2e9),
               MemorySample("soak", 9.0, 3e9), MemorySample("end", 12.0, 2.5e9)]
    trend = MemoryTrend.of(samples)
    assert trend == MemoryTrend(first=2e9, peak=3e9, last=2.5e9, samples=3)
    assert trend.growth == pytest.approx(0.5e9)
    assert MemoryTrend.of(samples[:1]) is None


def _summary(c: int, p50: float, p99: float, rtf: float, x_real_time: float) -> LevelSummary:
    return LevelSummary(c, 10, 10, 0, 0, p50, p50, p99, rtf, rtf, x_real_time, 1.0, 10.0, *([math.nan] * 3))


SERVED = [_summary(1, 8.0, 12.0, 0.005, 200.0), _summary(64, 40.0, 90.0, 0.05, 1500.0),
          _summary(256, 150.0, 400.0, 0.2, 2000.0)]
EAGER = [_summary(1, 14.0, 16.0, 0.027, 37.0), _summary(64, 900.0, 2000.0, 1.7, 40.0)]


def test_best_level_is_the_fastest_within_the_p99_limit() -> None:
    assert best_level(SERVED, 250.0).concurrency == 64  # 256 is faster but its p99 is 400 ms
    assert best_level(SERVED, 5.0) is None


def test_baseline_ratios_pair_equal_concurrencies() -> None:
    pairs = baseline_pairs(SERVED, EAGER)
    assert [(s.concurrency, b.concurrency) for s, b in pairs] == [(1, 1), (64, 64)]
    row = dict(zip(RATIO_HEADERS, ratio_row(*pairs[1]), strict=True))
    assert row["throughput served / eager"] == "37.5x"
    assert row["RTF eager / served"] == "34.0x"
    assert baseline_pairs(SERVED[:1], EAGER[1:]) == []


GOALS = Goals.load(Path(__file__).parents[1] / "docs" / "bench-goals.toml")


def test_goals_judge_this_runs_numbers() -> None:
    rows = GOALS.rows(RunNumbers(SERVED, EAGER, MemoryTrend(2e9, 5.5e9, 5e9, 9), MemoryTrend(5e9, 5.2e9, 5.1e9, 4),
                                 2000))
    assert [r[2] for r in rows] == ["yes", "yes", "yes", "yes", "yes", "yes", "**no**"]  # +95 MiB over the soak
    assert rows[2][1] == "1,500x at concurrency 64 (p99 90 ms)"
    assert rows[4][1] == "5.4x"  # single-stream RTF 0.027 / 0.005
    assert rows[6][1] == "+95 MiB over 2000 requests"


def test_goals_without_baseline_gpu_or_qualifying_level() -> None:
    rows = GOALS.rows(RunNumbers([_summary(1, 50.0, 300.0, 0.2, 5.0)], [], None, None, 10))
    assert [r[2] for r in rows] == ["**no**", "not measured", "**no**", "not measured", "not measured",
                                    "not measured", "not measured"]
    assert rows[2][1] == "no level had p99 <= 250 ms"
    assert rows[5][1] == rows[6][1] == "n/a (no GPU metrics)"


def test_goals_keep_the_files_order_and_subset_and_name_what_is_wrong(tmp_path: Path) -> None:
    goals = Goals.parse({"gpu_memory": {"at_most_gb": 1}, "first_chunk_p50": {"concurrency": 64, "at_most_ms": 50}})
    rows = goals.rows(RunNumbers(SERVED, EAGER, MemoryTrend(2e9, 2e9, 2e9, 1)))
    assert rows == [["GPU memory of the server <= 1 GB (peak)", "2.00 GB", "**no**"],
                    ["first chunk p50 <= 50 ms at concurrency 64", "40.0 ms", "yes"]]
    with pytest.raises(GoalsError, match="unknown goal 'speed'"):
        Goals.parse({"speed": {"at_least": 1}})
    with pytest.raises(GoalsError, match="takes exactly concurrency, at_most_ms"):
        Goals.parse({"first_chunk_p99": {"at_most_ms": 1}})
    (tmp_path / "goals.json").write_text('{"gpu_memory": {"at_most_gb": 6}}')
    assert Goals.load(tmp_path / "goals.json").entries == {"gpu_memory": {"at_most_gb": 6.0}}
    (tmp_path / "bad.toml").write_text("[gpu_memory\n")
    with pytest.raises(GoalsError, match="bad.toml"):
        Goals.load(tmp_path / "bad.toml")


def test_reference_run_scales_the_best_aggregate() -> None:
    report = _report(trained=True)
    report.levels = [LevelResult(concurrency=c, records=[RequestRecord(index=0, measured=True, start=0.0,
                                                                      first_chunk=0.05, end=1.0, audio_seconds=a)],
                                 loaded_seconds=1.0) for c, a in ((1, 100.0), (64, 800.0))]
    reference = reference_level(report_json(report), 250.0)
    assert (reference.concurrency, reference.audio_per_second) == (64, 800.0)
    rows = GOALS.rows(RunNumbers(SERVED, EAGER, reference=reference))
    assert rows[-1][1:] == ["1.88x (reference: 800x at concurrency 64)", "yes"]  # 1500 / 800
    assert len(GOALS.rows(RunNumbers(SERVED, EAGER))) == len(rows) - 1


def test_render_markdown_with_baseline_memory_and_soak() -> None:
    report = _report(trained=True)
    report.runtime, report.baseline_runtime = "triton torch-cuda", "eager cuda"
    report.baseline = [_level()]
    report.soak = _level()
    report.memory = [MemorySample("start", 0.0, 2**30), MemorySample("after c=2", 10.0, 1.5 * 2**30)]
    report.soak_memory = [MemorySample("soak", 11.0, 1.5 * 2**30), MemorySample("soak end", 20.0, 1.5 * 2**30)]
    report.goals, report.goals_file = GOALS, "docs/bench-goals.toml"
    text = render_markdown(report)
    results = text.split("## Results")[1]
    assert "| triton torch-cuda | 2 | 4 | 2 | 1 | 1 | 1,000.0 |" in results
    assert "| eager cuda | 2 | 4 | 2 | 1 | 1 | 1,000.0 |" in results
    assert "| triton torch-cuda, soak | 2 |" in results
    assert "| " + " | ".join(RATIO_HEADERS) + " |" in results
    assert "- Sweep: first 1.00 GiB, peak 1.50 GiB, last 1.50 GiB, growth +512 MiB (2 samples)" in results
    assert "- Soak: first 1.50 GiB, peak 1.50 GiB, last 1.50 GiB, growth +0 MiB (2 samples)" in results
    assert "### Goals (from `docs/bench-goals.toml`)" in results
    assert "| no GPU memory growth over the soak (<= 64 MiB) | +0 MiB over 4 requests | yes |" in results
    assert "Concurrency 2 (soak):" in results


def test_render_markdown_says_na_without_gpu_metrics() -> None:
    report = _report(trained=True)
    report.memory = [MemorySample("start", 0.0, None)]
    assert "n/a: the server reports no `nv_gpu_memory_used_bytes`" in render_markdown(report)
    assert "Against the eager baseline" not in render_markdown(report)


def test_plot_draws_before_any_level_and_with_failed_levels(tmp_path: Path) -> None:
    failed = summarize(LevelResult(concurrency=4, records=[], loaded_seconds=0.0))  # NaN everywhere
    plot({}, [], tmp_path / "empty.png", "before the first level")
    plot({"": [failed, *SERVED], "80 % rep.": SERVED}, EAGER, tmp_path / "full.png", "levels and baseline")
    assert (tmp_path / "empty.png").stat().st_size > 1000 and (tmp_path / "full.png").stat().st_size > 10_000


def test_report_json_is_strict_and_keeps_every_request() -> None:
    report = _report(trained=True)
    report.memory = [MemorySample("start", 0.0, None)]
    data = json.loads(report_json(report), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert len(data["report"]["levels"][0]["records"]) == 6
    assert data["report"]["levels"][0]["records"][3]["error"] == "TTSError: boom"
    assert data["summaries"]["levels"][0]["first_chunk_p50"] == pytest.approx(1000.0)
    assert data["report"]["memory"] == [{"label": "start", "seconds": 0.0, "used": None}]


@pytest.mark.slow
def test_bench_against_the_embedded_server_with_a_cpu_baseline(tmp_path: Path) -> None:
    """One tiny run end to end: real tritonserver, the eager baseline in its child process (the soak shares
    run_level and the memory sampling with the levels, and would add ~5 s of idle waits). The grace is a bound,
    not a wait: in a clean-clone run on a machine loaded twice over the eager request was cut off after 60 s."""
    status = main(["--model-repository", str(tmp_path / "repo"), "--concurrency", "1", "--requests", "1",
                   "--seconds", "1", "--grace", "240", "--warmup", "0", "--baseline-device", "cpu",
                   "--baseline-concurrency", "1", "--repeat-ratio", "0", "1", "--out", str(tmp_path / "out")])
    assert status == 0
    out = tmp_path / "out"
    text = (out / "BENCHMARKS.md").read_text()
    assert "| triton onnxruntime-python | 1 | 1 | 1 | 0 | 0 |" in text
    assert "| eager cpu | 1 | 1 | 1 | 0 | 0 |" in text
    assert "n/a: the server reports no `nv_gpu_memory_used_bytes`" in text
    data = json.loads((out / "bench.json").read_text())
    assert [m["label"] for m in data["report"]["memory"]] == ["start", "after R=0 c=1", "after R=1 c=1", "end"]
    assert data["summaries"]["baseline"][0]["completed"] == 1
    # one level per repeat ratio; no utterance cache on this server, so no hit rate
    assert [level["repeat_ratio"] for level in data["report"]["levels"]] == [0, 1]
    assert [s["repeat_pct"] for s in data["summaries"]["levels"]] == [0, 100]  # the opening request's text repeats
    assert [s["cache_hit_pct"] for s in data["summaries"]["levels"]] == [None, None]
    assert (out / "concurrency.png").stat().st_size > 10_000
    assert "Started GRPCInferenceService" in (out / "tritonserver.log").read_text()


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


def test_a_failing_baseline_is_reported_not_fatal() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    plan = BaselinePlan("cuda", (1,), requests=1, seconds=1.0, grace=1.0, warmup=0)
    levels, note = run_baseline(plan, print)  # the child cannot move the stages to CUDA
    assert levels == []
    assert note.startswith("**The eager baseline on cuda failed**")


def test_bench_refuses_a_gpu_target_without_cuda(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    assert main(["--target", "torch-cuda", "--baseline-device", "none", "--model-repository",
                 str(tmp_path / "repo")]) == 2
    assert "--target torch-cuda needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "repo").exists()  # refused before building anything


#: The utterance cache's counters as the BLS adds them to Triton's metrics page.
CACHE_LINES = """# HELP tts_cache_lookups_total Utterance cache lookups by outcome
# TYPE tts_cache_lookups_total counter
tts_cache_lookups_total{model="tts",outcome="hit"} 8
tts_cache_lookups_total{model="tts",outcome="miss"} 2
tts_cache_lookups_total{model="tts_offline",outcome="hit"} 1
tts_cache_lookups_total{model="tts",outcome="error"} 0
tts_cache_lookups_total_created{model="tts",outcome="hit"} 1.7e9
"""


def test_cache_lookups_sum_models_by_outcome_and_are_empty_without_a_cache() -> None:
    assert cache_lookups(CPU_METRICS + CACHE_LINES) == {"hit": 9.0, "miss": 2.0, "error": 0.0}
    assert cache_lookups(CPU_METRICS) == {}


def test_a_level_reports_its_repeats_and_cache_hit_rate() -> None:
    level = _level()
    level.repeat_ratio, level.cache = 0.5, {"hit": 3, "miss": 1, "error": 0}
    level.records[1].repeat = True
    s = summarize(level)
    assert (s.repeat_pct, s.cache_hit_pct) == (25.0, 75.0)
    plain = summarize(_level())
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
