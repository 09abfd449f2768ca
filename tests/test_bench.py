"""Pure logic of ``tts_triton.bench``: percentiles, statistics diffing, level summaries, table and report rendering."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tts_triton.bench import (
    LEVEL_HEADERS,
    MODEL_HEADERS,
    CpuSample,
    LevelResult,
    Report,
    RequestRecord,
    diff_stats,
    flatten_stats,
    percentile,
    render_markdown,
    summarize,
)
from tts_triton.tables import markdown_table, text_table


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
    ]
    return LevelResult(concurrency=2, records=records, loaded_seconds=10.0, cpu_busy=90.0, cpu_steal=1.0,
                       cpu_own=60.0)


def test_summarize_separates_measured_fillers_cutoffs_and_errors() -> None:
    s = summarize(_level())
    assert (s.concurrency, s.measured, s.completed, s.errors, s.cut_off) == (2, 4, 2, 1, 1)
    # first-chunk latency of every measured request that got audio (the cut-off one included)
    assert s.first_chunk_p50 == pytest.approx(1000.0)
    assert s.first_chunk_p99 == pytest.approx(percentile([500.0, 1500.0, 1000.0], 99))
    # RTF over measured completed requests: 4/2 and 6/4
    assert s.rtf_mean == pytest.approx((2.0 + 1.5) / 2)
    # throughput counts all audio received and every completed stream, fillers included
    assert s.audio_per_second == pytest.approx(1.0)
    assert s.requests_per_second == pytest.approx(0.3)


def test_summarize_empty_level_gives_nan_not_errors() -> None:
    s = summarize(LevelResult(concurrency=1, records=[], loaded_seconds=0.0))
    assert s.measured == 0 and math.isnan(s.first_chunk_p50) and math.isnan(s.rtf_mean)
    assert math.isnan(s.audio_per_second)


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
                  plot="docs/bench/concurrency.png", warmup=2, seconds=60.0, grace=120.0)


def test_render_markdown_has_every_section() -> None:
    text = render_markdown(_report(trained=True))
    assert "```\ntts-triton bench\n```" in text
    assert "- CPU: test cpu" in text
    assert "| " + " | ".join(LEVEL_HEADERS) + " |" in text
    assert "| " + " | ".join(MODEL_HEADERS) + " |" in text
    assert "| vocoder | 8 | 0 | 2 | 4.00 | 1.00 | 0.00 |" in text
    assert "![latency and throughput against concurrency](docs/bench/concurrency.png)" in text
    assert "`TTSError: boom`" in text
    assert "- Shared: during the levels other processes used 30-30 % of all cores, CPU steal time 1-1 %" in text
    assert "UNTRAINED" not in text
    assert "not in this run" not in text


def test_render_markdown_flags_uneven_other_load() -> None:
    report = _report(trained=True)
    quiet = LevelResult(concurrency=1, records=[], loaded_seconds=1.0, cpu_busy=50.0, cpu_steal=0.0, cpu_own=50.0)
    report.levels.insert(0, quiet)  # 0 % others here, 30 % in the other level
    assert "**but not in this run**: other processes took 0 to 30 %" in render_markdown(report)


@pytest.mark.parametrize(("trained", "phrase"), [(False, "UNTRAINED"), (None, "does not say whether its weights")])
def test_render_markdown_warns_about_untrained_weights(trained: bool | None, phrase: str) -> None:
    text = render_markdown(_report(trained))
    assert phrase in text.split("## Machine")[0]
