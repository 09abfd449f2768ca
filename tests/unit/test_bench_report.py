"""``tts_triton.bench``'s report: its tables and rendered Markdown (sections, warnings, baseline, memory, soak),
the comparison of two runs, GPU memory and cache lookups from Triton's metrics, the best level and the baseline
ratios, goals from a file, the plot and the JSON."""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
from pathlib import Path

import pytest
from bench_data import level_result, model_stats

from tts_triton.bench.compare import compare
from tts_triton.bench.goals import Ceiling, Goals, GoalsError, RunNumbers
from tts_triton.bench.plot import plot
from tts_triton.bench.prometheus import cache_lookups, gpu_memory_bytes
from tts_triton.bench.report import (
    LEVEL_HEADERS,
    MODEL_HEADERS,
    RATIO_HEADERS,
    Report,
    ratio_row,
    read_bench_text,
    reference_level,
    render_markdown,
    report_json,
)
from tts_triton.bench.stats import (
    LevelResult,
    LevelSummary,
    MemorySample,
    MemoryTrend,
    baseline_pairs,
    best_level,
    diff_stats,
    flatten_stats,
    summarize,
)
from tts_triton.bench.workload import RequestRecord
from tts_triton.jobs.tables import markdown_table, text_table


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
    level = level_result()
    level.models = diff_stats({}, flatten_stats({"model_stats": [model_stats("vocoder", 8, 2, 8, 8_000_000, 0)]}))
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
    vocoder = model_stats("vocoder", 8, 2, 2, 8_000_000, 0)
    first_decode = model_stats("first_decode", 3, 3, 3, 3_000_000, 0)  # a model only the later run has
    after.levels[0].models = diff_stats({}, flatten_stats({"model_stats": [vocoder, first_decode]}))
    extra = level_result()
    extra.concurrency = 4  # only in the later run: not compared
    after.levels.append(extra)
    text = compare(json.loads(report_json(before)), json.loads(report_json(after)), ("main", "new"))
    assert text.startswith("Each cell: main → new (new / main).")
    assert "| 2 | 1,000.0 → 500.0 (0.50x) |" in text
    assert "| 4 |" not in text
    assert "| 2 | vocoder | 8 → 2 | 8 → 8 | 2 → 2 |" in text
    assert "| 2 | first_decode | – → 3 | – → 3 | – → 3 | – → 0.00 |" in text
    assert "| 2 | – | – | – | – |" in text  # no CPU known


def test_compare_reads_the_server_cpu_per_audio_second_even_where_only_shares_were_kept() -> None:
    before, after = _report(trained=True), _report(trained=True)
    # the level's span is 9 s (its last response); 11 s of audio: 100 % of a core is 9 core-s, 818 core-ms / audio s
    before.levels[0].cpu_processes = {"stub tts": (8, 200.0), "stub decoder": (2, 100.0), "bench client": (1, 50.0)}
    after.levels[0].cpu_processes = {"stub tts": (8, 100.0), "stub decoder": (2, 100.0), "bench client": (1, 50.0)}
    after.levels[0].cpu_seconds = {"stub tts": 9.0, "stub decoder": 9.0, "bench client": 4.5}
    text = compare(json.loads(report_json(before)), json.loads(report_json(after)))
    assert "from each process kind's share" in text  # the earlier bench lacks the figure: both sides from shares
    assert ("| 2 | 2,454.55 → 1,636.36 (0.67x) | 1,636.36 → 818.18 (0.50x) | 818.18 → 818.18 (1.00x) | 0.00 → 0.00"
            in text)
    after.levels[0].cpu_seconds, before.levels[0].cpu_seconds = {"stub tts": 4.5}, {"stub tts": 9.0}
    text = compare(json.loads(report_json(before)), json.loads(report_json(after)))
    assert "share" not in text and "| 2 | 818.18 → 409.09 (0.50x) |" in text  # both reported it: as reported


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
CPU_METRICS = (Path(__file__).parents[1] / "data" / "triton_metrics_cpu.txt").read_text()
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


GOALS = Goals.load(Path(__file__).parents[2] / "docs" / "bench-goals.toml")


def test_goals_judge_this_runs_numbers() -> None:
    rows = GOALS.rows(RunNumbers(SERVED, EAGER, MemoryTrend(2e9, 5.5e9, 5e9, 9), MemoryTrend(5e9, 5.2e9, 5.1e9, 4),
                                 2000, ceiling=Ceiling(2400.0, 128, "NVIDIA H100"), errors=1, streams=900))
    # 1,500x is under the file's 2,000x and 62 % of the ceiling; +95 MiB over the soak is growth; one stream failed
    assert [r[2] for r in rows] == ["yes", "yes", "**no**", "yes", "yes", "yes", "**no**", "**no**", "**no**", "yes"]
    assert rows[7][1] == "62 %: 1,500x at concurrency 64 of 2,400x (128 streams, NVIDIA H100)"
    assert rows[8][1:] == ["1 of 900", "**no**"] and rows[9][1:] == ["2000 requests", "yes"]
    assert rows[2][0] == ">= 2000x real time at the best concurrency with first chunk p99 <= 250 ms"
    assert rows[2][1] == "1,500x at concurrency 64 (p99 90 ms)"
    assert rows[4][1] == "5.4x"  # single-stream RTF 0.027 / 0.005
    assert rows[6][1] == "+95 MiB over 2000 requests"


def test_goals_without_baseline_gpu_or_qualifyinglevel_result() -> None:
    rows = GOALS.rows(RunNumbers([_summary(1, 50.0, 300.0, 0.2, 5.0)], [], None, None, 10))
    assert [r[2] for r in rows] == ["**no**", "not measured", "**no**", "not measured", "not measured",
                                    "not measured", "not measured", "not measured", "not measured", "**no**"]
    assert rows[7][1] == "no ceiling (--ceiling FILE)"
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


def test_a_ceiling_file_gives_its_best_row_and_the_report_sets_the_best_level_against_it(tmp_path: Path) -> None:
    path = tmp_path / "ceiling.json"
    path.write_text(json.dumps({"device": "NVIDIA H100", "how": "fp16", "rows": [
        {"streams": 64, "decoder_ms": 5.0, "vocoder_ms": 8.0, "x_real_time": 3383.0},
        {"streams": 128, "decoder_ms": 8.1, "vocoder_ms": 15.7, "x_real_time": 3711.0}]}))
    assert Ceiling.load(path) == Ceiling(3711.0, 128, "NVIDIA H100")
    (tmp_path / "bad.json").write_text('{"rows": []}')
    with pytest.raises(GoalsError, match="not a ceiling file"):
        Ceiling.load(tmp_path / "bad.json")
    report = _report(trained=True)
    report.ceiling = Ceiling(2200.0, 128, "NVIDIA H100")
    assert "No level had a first-chunk p99 <= 250 ms." in render_markdown(report)  # its p99 is 1.5 s
    fast = RequestRecord(index=0, measured=True, start=0.0, first_chunk=0.05, end=1.0, audio_seconds=1100.0)
    report.levels = [LevelResult(concurrency=64, records=[fast], loaded_seconds=1.0)]
    assert "2,200x real time at 128 streams. The best level with a first-chunk p99 <= 250 ms, 1,100x at " \
           "concurrency 64, is 50 % of it." in render_markdown(report)


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


def test_a_bench_json_reads_the_same_plain_or_gzipped(tmp_path: Path) -> None:
    text = report_json(_report(trained=True))
    (tmp_path / "bench.json").write_text(text)
    (tmp_path / "bench.json.gz").write_bytes(gzip.compress(text.encode()))
    assert read_bench_text(tmp_path / "bench.json") == read_bench_text(tmp_path / "bench.json.gz") == text


def test_render_markdown_with_baseline_memory_and_soak() -> None:
    report = _report(trained=True)
    report.runtime, report.baseline_runtime = "triton torch-cuda", "eager cuda"
    report.baseline = [level_result()]
    report.soak = level_result()
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


def test_gateway_bench_sets_each_gateway_count_against_direct_grpc_at_each_level(tmp_path: Path) -> None:
    from tts_triton.bench import gateway

    args = argparse.Namespace(streams=[64, 256], gateways=[1, 4], soak_concurrency=8)
    paths = {key: {"name": name, "first_byte_s": [0.010, 0.012, 0.011], "failures": 0}
             for key, name in (("grpc", "direct gRPC (first chunk)"), ("pcm", "gateway pcm (first byte)"),
                               ("mp3", "gateway mp3 (first byte)"))}
    throughput = [{"streams": s, "gateways": g, "audio_per_s": rate, "failures": failed}
                  for s, g, rate, failed in ((64, 0, 1000.0, 0), (64, 1, 500.0, 0), (64, 4, 950.0, 0),
                                             (256, 0, 2000.0, 0), (256, 1, 600.0, 3), (256, 4, 1800.0, 0))]
    result = {"paths": paths, "throughput": throughput, "soak": None, "args": {"streams": [64, 256]}}
    table = gateway._table(result, args)
    assert "| streams | direct gRPC audio s per s | 1 gateway process (pcm) | 4 gateway processes (pcm) |" in table
    assert "| 64 | 1,000.0 | 500.0 (x0.50) | 950.0 (x0.95) |" in table
    assert "| 256 | 2,000.0 | 600.0 (x0.30, 3 failed) | 1,800.0 (x0.90) |" in table
    gateway._plot(result, tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000
