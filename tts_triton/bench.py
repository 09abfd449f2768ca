"""``tts-triton bench``: streaming latency and throughput of the ``tts`` model at several concurrencies.

    tts-triton bench                                  # embedded server on free loopback ports, default levels
    tts-triton bench -- --url localhost:8001 --concurrency 1 8 32 --seconds 120

For each concurrency C, C closed-loop workers stream a fixed, deterministic mix of sentences over
gRPC (:class:`~tts_triton.client.AsyncTTSClient`). Requests started during the first ``--seconds``
(at most ``--requests``) are *measured*; afterwards the workers keep C streams in flight with
unmeasured *filler* requests until every measured request has finished (or ``--grace`` expires;
requests still running are then cancelled and reported as cut off), so that every measured request
ran under the same load. Throughput counts all audio received while the load was held. Triton's
per-model statistics are read before and after each level and diffed.

    tts-triton bench -- --target torch-cuda --concurrency 1 2 4 8 16 32 64 128 256 --soak 2000 --json bench.json

In the same run (GPU hosts): the *eager baseline* (``--baseline-device``), the project's PyTorch stages in a
child process through the same decode loop, batch 1, at ``--baseline-concurrency`` (measured before the server
starts); GPU memory from Triton's metrics before, between and after the levels; with ``--soak N``, N more
requests at the best concurrency with GPU memory sampled every few seconds. The report ends with issue 12's
targets, checked against this run's numbers.

Writes a Markdown report (default ``runs/bench/BENCHMARKS.md``), a PNG plot (default
``runs/bench/concurrency.png``) and, with ``--json``, every raw number; all three are rewritten after every
level, so a run cut off midway leaves the levels it finished.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tts_triton import audio
from tts_triton.config import ModelConfig
from tts_triton.contract import TTS
from tts_triton.figures import pyplot, save_figure
from tts_triton.paths import default_model_repository
from tts_triton.server import TritonInstall, TritonNotFoundError, TritonServer, TritonServerError, free_ports
from tts_triton.tables import markdown_table, text_table

__all__ = [
    "SENTENCES",
    "TARGETS",
    "BaselinePlan",
    "BundleServer",
    "CpuSample",
    "InProcessClient",
    "LevelResult",
    "LevelSummary",
    "MemorySample",
    "MemoryTrend",
    "ModelDelta",
    "Report",
    "RequestRecord",
    "ServerInfo",
    "Targets",
    "baseline_pairs",
    "best_level",
    "bundle_install",
    "diff_stats",
    "flatten_stats",
    "gpu_memory_bytes",
    "main",
    "measure_baseline",
    "percentile",
    "ratio_row",
    "read_gpu_memory",
    "render_markdown",
    "reference_level",
    "report_json",
    "run_baseline",
    "run_level",
    "run_soak",
    "summarize",
    "target_rows",
]

#: The request mix, cycled in this order: (kind, text). Request i of a level speaks ``SENTENCES[i % 6]``.
SENTENCES: tuple[tuple[str, str], ...] = (
    ("short", "Hello there."),
    ("medium", "Please turn left at the next corner."),
    ("short", "Is it ready yet?"),
    ("long", "Thanks for calling; we will be with you in a moment."),
    ("short", "Good morning!"),
    ("medium", "The train to the airport leaves at noon."),
)
#: Models whose statistics are diffed, in pipeline order.
MODELS = ("tts", "encode", "text_encoder", "style_encoder", "decoder", "vocoder")
_COMPUTE_PARTS = ("compute_input", "compute_infer", "compute_output")
_COUNTERS = ("success", "fail", "queue", *_COMPUTE_PARTS)
MAX_CONCURRENCY = 256
_REPORT_EVERY = 10.0  # seconds between progress lines within a level
_UNEVEN_LOAD = 10.0  # percentage points of other processes' CPU share between levels that void the comparison


# --------------------------------------------------------------------------- statistics (pure)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between order statistics (numpy's default);
    NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class RequestRecord:
    """One stream of a level. Times are seconds since the level started; ``first_chunk`` and ``end`` stay
    None until the first audio arrives / the stream completes (None at the end: cut off or failed). ``opening``:
    a worker's first request (the level's C streams opened at once; never measured)."""

    index: int
    measured: bool
    start: float
    opening: bool = False
    first_chunk: float | None = None
    end: float | None = None
    audio_seconds: float = 0.0
    chunks: int = 0
    error: str | None = None
    #: ``audio_seconds`` when the level's load ended (a filler still running then finishes unmeasured)
    audio_when_loaded: float | None = None

    @property
    def ok(self) -> bool:
        """Completed without error."""
        return self.end is not None and self.error is None


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU time in clock ticks: the machine's (``cpu`` line of ``/proc/stat``: all, idle + iowait,
    steal) and the benchmark's own (this process plus the server's process group, when known)."""

    total: int
    idle: int
    steal: int
    own: int

    @classmethod
    def read(cls, server_group: int | None = None) -> CpuSample | None:
        """The current counters, or None where ``/proc`` is unavailable."""
        try:
            fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        own = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # fields after "pid (comm)": state ppid pgrp ... utime(11) stime(12)
                rest = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # the process exited meanwhile
            if int(stat.parent.name) == os.getpid() or (server_group is not None and int(rest[2]) == server_group):
                own += int(rest[11]) + int(rest[12])
        steal = fields[7] if len(fields) > 7 else 0
        return cls(total=sum(fields[:8]), idle=fields[3] + fields[4], steal=steal, own=own)

    @staticmethod
    def usage(before: CpuSample | None, after: CpuSample | None) -> tuple[float, float, float]:
        """(busy %, steal %, the benchmark's own %) of all cores between two samples; NaN when unknown."""
        if before is None or after is None or after.total <= before.total:
            return math.nan, math.nan, math.nan
        span = after.total - before.total
        return (100.0 * (1 - (after.idle - before.idle) / span), 100.0 * (after.steal - before.steal) / span,
                100.0 * (after.own - before.own) / span)


def flatten_stats(statistics: dict[str, Any]) -> dict[str, dict[str, int]]:
    """``get_inference_statistics(as_json=True)`` -> ``{model: {counter: int}}``.

    Counters: ``inference_count``, ``execution_count`` and ``<stat>.count`` / ``<stat>.ns`` for
    success, fail, queue, compute_input, compute_infer, compute_output; absent ones are 0. Versions of
    one model are summed.
    """
    out: dict[str, dict[str, int]] = {}
    for model in statistics.get("model_stats", []):
        counters = out.setdefault(model["name"], {})
        values = {key: model.get(key, 0) for key in ("inference_count", "execution_count")}
        stats = model.get("inference_stats", {})
        for name in _COUNTERS:
            values[f"{name}.count"] = stats.get(name, {}).get("count", 0)
            values[f"{name}.ns"] = stats.get(name, {}).get("ns", 0)
        for key, value in values.items():
            counters[key] = counters.get(key, 0) + int(value)
    return out


@dataclass(frozen=True)
class ModelDelta:
    """What one model did between two statistics snapshots (counter differences)."""

    name: str
    counters: dict[str, int]

    @property
    def requests(self) -> int:
        """Successful requests."""
        return self.counters["success.count"]

    @property
    def failures(self) -> int:
        """Failed requests."""
        return self.counters["fail.count"]

    @property
    def executions(self) -> int:
        """Model executions (batches)."""
        return self.counters["execution_count"]

    @property
    def avg_batch(self) -> float:
        """Inferences per execution (the dynamic batcher's average batch size); NaN without executions."""
        return self.counters["inference_count"] / self.executions if self.executions else math.nan

    def per_request_ms(self, *stats: str) -> float:
        count = self.counters[f"{stats[0]}.count"]
        return sum(self.counters[f"{s}.ns"] for s in stats) / count / 1e6 if count else math.nan

    @property
    def queue_ms(self) -> float:
        """Mean time a request waited in the model's queue, ms."""
        return self.per_request_ms("queue")

    @property
    def compute_ms(self) -> float:
        """Mean compute time (input + infer + output) per request, ms; a batch's time counts for each member."""
        return self.per_request_ms(*_COMPUTE_PARTS)


def diff_stats(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
               models: Sequence[str] = MODELS) -> list[ModelDelta]:
    """Per-model differences ``after - before`` for ``models`` present in ``after``, in that order."""
    return [
        ModelDelta(name, {key: value - before.get(name, {}).get(key, 0) for key, value in after[name].items()})
        for name in models if name in after
    ]


@dataclass
class LevelResult:
    """Everything recorded at one concurrency: every stream, the loaded wall time, CPU and model statistics."""

    concurrency: int
    records: list[RequestRecord]
    loaded_seconds: float
    cpu_busy: float = math.nan
    cpu_steal: float = math.nan
    cpu_own: float = math.nan
    models: list[ModelDelta] = field(default_factory=list)


@dataclass(frozen=True)
class LevelSummary:
    """The reported numbers of one level. Latencies in ms; RTF = total time / audio seconds (measured, completed
    requests); throughput over the loaded period, counting every stream (fillers and partial audio included)."""

    concurrency: int
    measured: int
    completed: int
    errors: int
    cut_off: int
    first_chunk_p50: float
    first_chunk_p90: float
    first_chunk_p99: float
    rtf_mean: float
    rtf_p90: float
    audio_per_second: float
    requests_per_second: float
    loaded_seconds: float
    cpu_busy: float
    cpu_steal: float
    cpu_own: float
    #: First-chunk latency of the opening burst (every worker's first request, all sent at once), ms.
    opening_p50: float = math.nan
    opening_p99: float = math.nan


def summarize(level: LevelResult) -> LevelSummary:
    """Reduce a level's records to the reported numbers (see :class:`LevelSummary`)."""
    measured = [r for r in level.records if r.measured]
    done = [r for r in measured if r.ok and r.audio_seconds > 0]
    first = [1000 * (r.first_chunk - r.start) for r in measured if r.first_chunk is not None]
    opening = [1000 * (r.first_chunk - r.start) for r in level.records if r.opening and r.first_chunk is not None]
    rtf = [(r.end - r.start) / r.audio_seconds for r in done if r.end is not None]
    span = level.loaded_seconds
    return LevelSummary(
        concurrency=level.concurrency,
        measured=len(measured),
        completed=sum(r.ok for r in measured),
        errors=sum(r.error is not None for r in level.records),
        cut_off=sum(r.end is None and r.error is None for r in measured),
        first_chunk_p50=percentile(first, 50),
        first_chunk_p90=percentile(first, 90),
        first_chunk_p99=percentile(first, 99),
        rtf_mean=sum(rtf) / len(rtf) if rtf else math.nan,
        rtf_p90=percentile(rtf, 90),
        audio_per_second=sum(r.audio_seconds if r.audio_when_loaded is None else r.audio_when_loaded
                             for r in level.records) / span if span > 0 else math.nan,
        requests_per_second=sum(r.ok for r in level.records) / span if span > 0 else math.nan,
        loaded_seconds=span,
        cpu_busy=level.cpu_busy,
        cpu_steal=level.cpu_steal,
        cpu_own=level.cpu_own,
        opening_p50=percentile(opening, 50),
        opening_p99=percentile(opening, 99),
    )


# --------------------------------------------------------------------------- rendering (pure)

LEVEL_HEADERS = ("runtime", "concurrency", "measured", "done", "errors", "cut off", "first chunk p50 ms", "p90 ms",
                 "p99 ms", "RTF mean", "RTF p90", "audio s / s", "requests / s", "loaded s", "CPU busy %",
                 "of which bench %")
MODEL_HEADERS = ("model", "requests", "failures", "executions", "avg batch", "queue ms / req", "compute ms / req",
                 "of which input", "infer", "output")


def _num(value: float, digits: int = 0) -> str:
    return "–" if math.isnan(value) else f"{value:,.{digits}f}"


def level_row(s: LevelSummary, runtime: str) -> list[str]:
    """One row of the levels table (headers :data:`LEVEL_HEADERS`)."""
    return [runtime, str(s.concurrency), str(s.measured), str(s.completed), str(s.errors), str(s.cut_off),
            _num(s.first_chunk_p50, 1), _num(s.first_chunk_p90, 1), _num(s.first_chunk_p99, 1), _num(s.rtf_mean, 3),
            _num(s.rtf_p90, 3), _num(s.audio_per_second, 2), _num(s.requests_per_second, 3),
            _num(s.loaded_seconds, 1), _num(s.cpu_busy), _num(s.cpu_own)]


OPENING_HEADERS = ("runtime", "concurrency", "first chunk p50 ms", "p99 ms")


def opening_row(s: LevelSummary, runtime: str) -> list[str]:
    """One row of the opening-burst table (headers :data:`OPENING_HEADERS`)."""
    return [runtime, str(s.concurrency), _num(s.opening_p50, 1), _num(s.opening_p99, 1)]


def model_row(m: ModelDelta) -> list[str]:
    """One row of a per-model statistics table (headers :data:`MODEL_HEADERS`)."""
    return [m.name, str(m.requests), str(m.failures), str(m.executions), _num(m.avg_batch, 2), _num(m.queue_ms, 2),
            _num(m.compute_ms, 2), *(_num(m.per_request_ms(part), 2) for part in _COMPUTE_PARTS)]


# ------------------------------------------------------------------ GPU memory, baseline ratios, targets (pure)

#: Triton's per-GPU memory gauge (``gpu_uuid`` label), in bytes.
GPU_MEMORY_METRIC = "nv_gpu_memory_used_bytes"


def gpu_memory_bytes(metrics: str) -> float | None:
    """The sum of :data:`GPU_MEMORY_METRIC` over every GPU of a Prometheus text page (Triton's ``/metrics``);
    None when the page has no such sample (a server without GPU metrics)."""
    total: float | None = None
    for line in metrics.splitlines():
        if not line.startswith(GPU_MEMORY_METRIC):
            continue
        rest = line[len(GPU_MEMORY_METRIC):]
        if rest.startswith("{"):
            rest = rest[rest.index("}") + 1:]
        elif not rest.startswith(" "):
            continue  # another metric whose name merely starts alike
        total = (total or 0.0) + float(rest.split()[0])
    return total


@dataclass(frozen=True)
class MemorySample:
    """GPU memory in use on the server's GPUs (bytes, summed over GPUs; None: no GPU metrics), ``seconds`` after
    the benchmark started, taken at ``label`` (``start``, ``after c=16``, ``soak``, ``end``)."""

    label: str
    seconds: float
    used: float | None


@dataclass(frozen=True)
class MemoryTrend:
    """First, peak and last of the samples that had a value, and how many had one."""

    first: float
    peak: float
    last: float
    samples: int

    @property
    def growth(self) -> float:
        """last - first, bytes."""
        return self.last - self.first

    @classmethod
    def of(cls, samples: Sequence[MemorySample]) -> MemoryTrend | None:
        """The trend of ``samples``; None when none had a value."""
        values = [s.used for s in samples if s.used is not None]
        return cls(values[0], max(values), values[-1], len(values)) if values else None


@dataclass(frozen=True)
class Targets:
    """Issue 12's targets; the two-GPU one compares this run's best aggregate with an earlier run's
    (``--reference``)."""

    first_chunk_p50_c1_ms: float = 10.0
    p99_ms: float = 100.0
    p99_concurrency: int = 64
    best_x_real_time: float = 1000.0
    best_p99_ms: float = 250.0
    throughput_vs_baseline: float = 30.0
    rtf_vs_baseline: float = 3.0
    memory_bytes: float = 6e9
    memory_growth_bytes: float = 64 * 2**20  # what counts as "no growth" over the soak
    scale_vs_reference: float = 1.8  # two GPUs against one (--reference: the one-GPU run's JSON)


TARGETS = Targets()


def best_level(summaries: Sequence[LevelSummary], p99_ms: float) -> LevelSummary | None:
    """The level with the highest throughput among those whose first-chunk p99 is at most ``p99_ms``; None if none."""
    fit = [s for s in summaries if s.first_chunk_p99 <= p99_ms and not math.isnan(s.audio_per_second)]
    return max(fit, key=lambda s: s.audio_per_second, default=None)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and not (math.isnan(a) or math.isnan(b)) else math.nan


def baseline_pairs(served: Sequence[LevelSummary],
                   baseline: Sequence[LevelSummary]) -> list[tuple[LevelSummary, LevelSummary]]:
    """(served, baseline) summaries at each concurrency both measured, in the baseline's order."""
    by_c = {s.concurrency: s for s in served}
    return [(by_c[b.concurrency], b) for b in baseline if b.concurrency in by_c]


RATIO_HEADERS = ("concurrency", "served x real time", "eager x real time", "throughput served / eager",
                 "served RTF", "eager RTF", "RTF eager / served", "first chunk p50 ms served", "eager")


def ratio_row(served: LevelSummary, eager: LevelSummary) -> list[str]:
    """One row of the baseline comparison (headers :data:`RATIO_HEADERS`); ratios above 1 favour the server."""
    return [str(served.concurrency), _num(served.audio_per_second, 1), _num(eager.audio_per_second, 1),
            _num(_ratio(served.audio_per_second, eager.audio_per_second), 1) + "x", _num(served.rtf_mean, 4),
            _num(eager.rtf_mean, 4), _num(_ratio(eager.rtf_mean, served.rtf_mean), 1) + "x",
            _num(served.first_chunk_p50, 1), _num(eager.first_chunk_p50, 1)]


def _verdict(value: float, limit: float, at_least: bool = False) -> str:
    if math.isnan(value):
        return "not measured"
    return "yes" if (value >= limit if at_least else value <= limit) else "**no**"


def target_rows(served: Sequence[LevelSummary], baseline: Sequence[LevelSummary], memory: MemoryTrend | None,
                soak: MemoryTrend | None, soak_requests: int, reference: LevelSummary | None = None,
                t: Targets = TARGETS) -> list[list[str]]:
    """(target, measured, met) for each of :class:`Targets`, from this run's numbers; ``memory`` is the trend of
    every GPU memory sample, ``soak`` that of the soak's, which ran ``soak_requests`` requests (0: no soak);
    ``reference``, the best level of an earlier run to scale against (the two-GPU row appears only with it)."""
    by_c = {s.concurrency: s for s in served}
    eager = {b.concurrency: b for b in baseline}
    nan = LevelSummary(0, 0, 0, 0, 0, *([math.nan] * 11))
    c1, cp = by_c.get(1, nan), by_c.get(t.p99_concurrency, nan)
    best = best_level(served, t.best_p99_ms)
    throughput = _ratio(cp.audio_per_second, eager.get(t.p99_concurrency, nan).audio_per_second)
    rtf = _ratio(eager.get(1, nan).rtf_mean, c1.rtf_mean)
    peak = memory.peak if memory else math.nan
    growth = soak.growth if soak else math.nan
    scale = _ratio(best.audio_per_second if best else math.nan, reference.audio_per_second if reference else math.nan)
    scaled = ([[f">= {t.scale_vs_reference:g}x the aggregate of the --reference run (two GPUs against one; best "
                f"levels with p99 <= {t.best_p99_ms:g} ms)", f"{_num(scale, 2)}x (reference: "
                f"{_num(reference.audio_per_second, 0)}x at concurrency {reference.concurrency})",
                _verdict(scale, t.scale_vs_reference, at_least=True)]] if reference else [])
    return [
        [f"first chunk p50 <= {t.first_chunk_p50_c1_ms:g} ms at concurrency 1", f"{_num(c1.first_chunk_p50, 1)} ms",
         _verdict(c1.first_chunk_p50, t.first_chunk_p50_c1_ms)],
        [f"first chunk p99 <= {t.p99_ms:g} ms at concurrency {t.p99_concurrency}",
         f"{_num(cp.first_chunk_p99, 1)} ms", _verdict(cp.first_chunk_p99, t.p99_ms)],
        [f">= {t.best_x_real_time:g}x real time at the best concurrency with first chunk p99 <= {t.best_p99_ms:g} ms",
         f"{_num(best.audio_per_second, 0)}x at concurrency {best.concurrency} (p99 {_num(best.first_chunk_p99)} ms)"
         if best else f"no level had p99 <= {t.best_p99_ms:g} ms",
         _verdict(best.audio_per_second if best else math.nan, t.best_x_real_time, at_least=True)
         if best or not served else "**no**"],
        [f">= {t.throughput_vs_baseline:g}x the eager baseline's throughput at concurrency {t.p99_concurrency}",
         f"{_num(throughput, 1)}x", _verdict(throughput, t.throughput_vs_baseline, at_least=True)],
        [f"single-stream RTF >= {t.rtf_vs_baseline:g}x better than the eager baseline", f"{_num(rtf, 1)}x",
         _verdict(rtf, t.rtf_vs_baseline, at_least=True)],
        [f"GPU memory of the server <= {t.memory_bytes / 1e9:g} GB (peak)",
         f"{_num(peak / 1e9, 2)} GB" if memory else "n/a (no GPU metrics)", _verdict(peak, t.memory_bytes)],
        [f"no GPU memory growth over the soak (<= {t.memory_growth_bytes / 2**20:g} MiB)",
         f"{growth / 2**20:+,.0f} MiB over {soak_requests} requests" if soak
         else "n/a (no GPU metrics)" if soak_requests else "no soak (--soak N)",
         _verdict(growth, t.memory_growth_bytes)],
        *scaled,
    ]


def reference_level(report_json_text: str, p99_ms: float = TARGETS.best_p99_ms) -> LevelSummary | None:
    """The best served level (:func:`best_level`) of an earlier run's ``--json`` dump."""
    levels = json.loads(report_json_text)["summaries"]["levels"]
    return best_level([LevelSummary(**{k: math.nan if v is None else v for k, v in level.items()})
                       for level in levels], p99_ms)


@dataclass
class Report:
    """What the Markdown report is made of; main fills it in level by level. ``machine`` and ``server`` are
    (label, value) pairs; ``sentences`` rows are (kind, text, phoneme ids, max-steps guard audio s, median measured
    audio s). ``runtime`` names the served levels' runtime, ``baseline_runtime`` the eager baseline's; ``memory``
    holds the GPU memory samples of the sweep, ``soak_memory`` those of the soak; ``notes`` go above the results;
    ``reference`` is the best level of an earlier run (``--reference``)."""

    date: str
    command: str
    machine: list[tuple[str, str]]
    server: list[tuple[str, str]]
    trained: bool | None
    settings: dict[str, Any]
    levels: list[LevelResult]
    sentences: list[tuple[str, str, str, str, str]]
    plot: str
    warmup: int
    seconds: float
    grace: float
    runtime: str = "triton"
    baseline: list[LevelResult] = field(default_factory=list)
    baseline_runtime: str = "eager"
    memory: list[MemorySample] = field(default_factory=list)
    soak: LevelResult | None = None
    soak_memory: list[MemorySample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reference: LevelSummary | None = None

    def rows(self) -> list[tuple[str, LevelSummary]]:
        """(runtime, summary) of every level: served, eager baseline, soak."""
        return ([(self.runtime, summarize(level)) for level in self.levels]
                + [(self.baseline_runtime, summarize(level)) for level in self.baseline]
                + ([(f"{self.runtime}, soak", summarize(self.soak))] if self.soak else []))


def _untrained_note(trained: bool | None) -> str:
    if trained:
        return ""
    if trained is None:
        return ("> **The server does not say whether its weights are trained** (no `info.trained` in the `tts` "
                "model's voice bank): if they are not, the audio lengths below follow the decoder's max-steps "
                "guard rather than the text.\n\n")
    return ("> **The served weights are UNTRAINED (a seeded initialisation).** The audio is noise, and the decoder's "
            "stop gate is meaningless: decoding usually runs to the max-steps guard or stops early at an arbitrary "
            "step, so the audio length follows the guard, not the text (compare the guard and measured columns of "
            "the sentence table). Latency per audio second is still the real cost of these networks on this "
            "machine; re-measure when trained weights ship.\n\n")


def _other_load(summaries: Sequence[LevelSummary]) -> tuple[list[float], list[float]]:
    """(other processes' CPU %, steal %) of the levels that know them."""
    return ([s.cpu_busy - s.cpu_own for s in summaries if not math.isnan(s.cpu_own)],
            [s.cpu_steal for s in summaries if not math.isnan(s.cpu_steal)])


def _setup_sections(report: Report) -> list[str]:
    others, steal = _other_load([s for _, s in report.rows()])
    load = ([f"other processes used {min(others):.0f}-{max(others):.0f} % of all cores"] if others else []) + (
        [f"CPU steal time {min(steal):.0f}-{max(steal):.0f} %"] if steal else [])
    parts = [
        "# Benchmarks: streaming `tts` over gRPC\n\n",
        f"Generated by `tts_triton/bench.py` on {report.date}. Command:\n\n```\n{report.command}\n```\n\n",
        _untrained_note(report.trained),
        "## Machine\n\n",
        "".join(f"- {label}: {value}\n" for label, value in report.machine),
        f"- Shared: during the levels {', '.join(load)} (see *of which bench %* below)\n" if load else "",
        "\n## Server\n\n",
        "".join(f"- {label}: {value}\n" for label, value in report.server),
    ]
    if report.settings:
        rows = [[name, *(str(s.get(k) if s.get(k) is not None else "–")
                         for k in ("max_batch_size", "max_queue_delay_us", "instances", "batch_budget",
                                   "intra_op_threads", "inter_op_threads"))]
                for name, s in report.settings.items()]
        parts += ["\nNetwork model settings (from `repository.json`):\n\n",
                  markdown_table(("network", "max batch", "max queue delay µs", "instances", "batch budget",
                                  "intra-op threads", "inter-op threads"), rows), "\n"]
    return parts


def _method_section(report: Report) -> list[str]:
    return [
        "\n## Method\n\n",
        f"- Warm-up: {report.warmup} request(s) one at a time (the first sentences of the set), not measured.\n",
        f"- Per concurrency C: C closed-loop workers (one `AsyncTTSClient`, one gRPC stream per request, no think "
        "time). Each worker's first request is not measured: the C streams open at the same instant, a burst that a "
        "steady load never sees (its first-chunk latency is reported apart, under *Opening burst*). The requests "
        f"started from then on, within {report.seconds:g} s of the first of them (up to `--requests`), are measured; "
        "then "
        f"unmeasured filler requests keep C streams in flight until every measured one finished (at most "
        f"{report.grace:g} s more; measured requests still running then are counted as *cut off*). That ends the "
        f"load; the streams still open may then finish unmeasured within {report.grace:g} s (only what runs after "
        "that is cancelled: Triton 2.51 can crash on cancels, server#7840).\n",
        "- Requests cycle through the sentence set below in order, with the server's default voice and emotion.\n",
        f"- Eager baseline (runtime `{report.baseline_runtime}`), when run: the same sentence mix and the same levels' "
        "rules, in one separate process before the server starts: the default checkpoint's PyTorch stages (fp32, "
        "batch 1) through the same decode loop (`TTSService` + `TorchBackend`), G2P included; C asyncio streams "
        "take turns chunk by chunk on the one device.\n",
        "- First-chunk latency: request sent -> first audio chunk received, over measured requests that got audio. "
        "RTF: total stream time / audio seconds, over measured completed requests (below 1 is faster than real "
        "time). Throughput (*audio s / s*, the aggregate multiple of real time): audio seconds (and completed "
        "streams) received per wall second while the load was held (*loaded s*), fillers and partial audio "
        "included.\n",
        "- CPU busy %: all cores, from `/proc/stat`, over the loaded period; *of which bench %*: the part used by "
        "the benchmark itself (the embedded server's process group and the client process, which runs on the same "
        "machine); the rest was used by other processes.\n",
        "- Per-model statistics: Triton's `get_inference_statistics` before and after each level (after the "
        "server went idle), diffed; they include the fillers' work.\n",
        f"- GPU memory: Triton's `{GPU_MEMORY_METRIC}` from its metrics endpoint, summed over GPUs (device-wide: "
        "every process on them; the bench process itself holds no GPU memory, the baseline's child has exited), "
        "read before the first level, after each level and at the end, and every few seconds during the soak "
        "(`--soak`).\n",
        "\n### Sentence set\n\n",
        markdown_table(("kind", "text", "phoneme ids", "guard audio s", "measured audio s (median)"),
                       report.sentences, left=2),
    ]


def _gib(value: float) -> str:
    return f"{value / 2**30:,.2f} GiB"


def _memory_section(report: Report) -> list[str]:
    sweep, soak = MemoryTrend.of(report.memory), MemoryTrend.of(report.soak_memory)
    if sweep is None and soak is None:
        return ["### GPU memory\n\n", f"n/a: the server reports no `{GPU_MEMORY_METRIC}` (no GPU metrics).\n\n"]
    parts = ["### GPU memory\n\n"]
    for name, trend in (("Sweep", sweep), ("Soak", soak)):
        if trend:
            parts.append(f"- {name}: first {_gib(trend.first)}, peak {_gib(trend.peak)}, last {_gib(trend.last)}, "
                         f"growth {trend.growth / 2**20:+,.0f} MiB ({trend.samples} samples)\n")
    rows = [[s.label, _num(s.seconds, 1), "n/a" if s.used is None else _gib(s.used)] for s in report.memory]
    return [*parts, "\n", markdown_table(("sample", "time s", "used (all GPUs)"), rows), "\n\n"]


def _results_section(report: Report) -> list[str]:
    served = [summarize(level) for level in report.levels]
    baseline = [summarize(level) for level in report.baseline]
    parts = ["\n\n## Results\n\n", "".join(f"> {note}\n\n" for note in report.notes),
             markdown_table(LEVEL_HEADERS, [level_row(s, r) for r, s in report.rows()], left=2),
             "\n\n", f"![latency and throughput against concurrency]({report.plot})\n\n"]
    parts += ["### Opening burst\n\n",
              "Each level's first C requests, sent at the same instant (not measured above): a burst of C new "
              "listeners.\n\n",
              markdown_table(OPENING_HEADERS, [opening_row(s, r) for r, s in report.rows()], left=1), "\n\n"]
    pairs = baseline_pairs(served, baseline)
    if pairs:
        parts += ["### Against the eager baseline (same run)\n\n",
                  markdown_table(RATIO_HEADERS, [ratio_row(s, b) for s, b in pairs]), "\n\n"]
    parts += _memory_section(report)
    soak = report.soak
    parts += ["### Targets (issue 12)\n\n",
              markdown_table(("target", "measured", "met"), left=3, rows=
                             target_rows(served, baseline, MemoryTrend.of([*report.memory, *report.soak_memory]),
                                         MemoryTrend.of(report.soak_memory),
                                         sum(r.measured for r in soak.records) if soak else 0, report.reference)),
              "\n\n### Per-model Triton statistics, per level\n\n"]
    for level in [*report.levels, *([report.soak] if report.soak else [])]:
        parts += [f"Concurrency {level.concurrency}{' (soak)' if level is report.soak else ''}:\n\n",
                  markdown_table(MODEL_HEADERS, [model_row(m) for m in level.models]), "\n\n"]
    errors = sorted({r.error for level in [*report.levels, *report.baseline] for r in level.records if r.error})
    if errors:
        parts += ["### Errors\n\n", "".join(f"- `{e}`\n" for e in errors[:10]), "\n"]
    return parts


def _reading_section(report: Report) -> list[str]:
    others, _ = _other_load([summarize(level) for level in report.levels])
    return [
        "## Reading these numbers\n\n",
        "- Absolute numbers hold for this machine, under the other load stated above, only. The levels ran one "
        "after another in the same run against the same server, so their ratios (how latency and throughput "
        "change with concurrency) are the comparable part"
        + (f" — **but not in this run**: other processes took {min(others):.0f} to {max(others):.0f} % of the CPU "
           "depending on the level (column *of which bench %*), so the levels did not run under equal conditions."
           if others and max(others) - min(others) > _UNEVEN_LOAD else ".") + "\n",
        "- Percentiles are over the *measured* requests of a level; with few of them, p90 and p99 are close to "
        "the maximum.\n",
        "- `tts` is decoupled: Triton counts only its `execute()` call, which returns at once while the stream "
        "runs in the background, so its compute time is not the stream's duration. `encode` (and `style_encoder`) "
        "run only for requests with reference audio; preset voices call `text_encoder` directly.\n",
        "- compute ms / req counts a batch's execution time once per request in it; with batching the busy time "
        "of the model is about compute ms / req × requests / avg batch. It splits into Triton's *input* (gathering "
        "the batch's inputs), *infer* (the model's `execute`; for a Python model, with the hand-over to its stub "
        "process) and *output* (its responses).\n",
    ]


def render_markdown(report: Report) -> str:
    """The whole BENCHMARKS.md text for ``report`` (any part may still be empty: it is rewritten after each level)."""
    return "".join([*_setup_sections(report), *_method_section(report), *_results_section(report),
                    *_reading_section(report)])


def _plain(value: Any) -> Any:
    """``value`` with dataclasses as dicts and NaN as None, for strict JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def report_json(report: Report) -> str:
    """Every raw number of ``report`` (each request of each level, model statistics, memory samples) and each level's
    summary, as JSON."""
    summaries = {name: [dataclasses.asdict(summarize(level)) for level in levels] for name, levels in
                 (("levels", report.levels), ("baseline", report.baseline),
                  ("soak", [report.soak] if report.soak else []))}
    return json.dumps(_plain({"report": report, "summaries": summaries}), separators=(",", ":"))


# --------------------------------------------------------------------------- measuring


def _now() -> float:
    return time.perf_counter()


async def _one_stream(client: Any, record: RequestRecord, t0: float) -> None:
    """Stream ``record``'s sentence, filling in the record as chunks arrive (the record is complete even when
    this task is cancelled midway)."""
    from tts_triton.client import TTSError

    text = SENTENCES[record.index % len(SENTENCES)][1]
    try:
        async for chunk in client.stream(text):
            if record.first_chunk is None:
                record.first_chunk = _now() - t0
            record.chunks += 1
            record.audio_seconds += chunk.audio.shape[0] / chunk.sample_rate
        record.end = _now() - t0
    except TTSError as err:
        record.error = f"{type(err).__name__}: {err}"


async def run_level(client: Any, concurrency: int, requests: int, seconds: float, grace: float,
                    say: Callable[[str], None]) -> LevelResult:
    """Hold ``concurrency`` streams in flight; measure the requests started in ``seconds`` (at most ``requests``)
    from the first measured one. Each worker's first request is not measured: those C open at the same instant,
    a burst the steady load never sees (they are recorded as ``opening``). The load ends when the measured ones
    all finished or ``seconds + grace`` passed since the first of them (or the level) started. Streams still running
    then may finish within ``grace`` more seconds (audio they receive after the end does not count); only
    what runs after that is cancelled: Triton 2.51's gRPC frontend can crash on a cancel that races a
    stream's completion (triton-inference-server/server#7840, fixed in 2.53).
    The returned result has no model statistics or CPU usage yet."""
    t0 = _now()
    records: list[RequestRecord] = []
    counters = {"measured": 0, "next": 0}
    window: list[float] = []  # when the first measured request started
    loading = True

    def issuing() -> bool:
        return counters["measured"] < requests and (not window or _now() - window[0] < seconds)

    async def worker() -> None:
        opening = True
        while loading:
            measured = not opening and issuing()
            if measured and not window:
                window.append(_now())
            counters["measured"] += measured
            record = RequestRecord(index=counters["next"], measured=measured, start=_now() - t0, opening=opening)
            counters["next"] += 1
            opening = False
            records.append(record)
            await _one_stream(client, record, t0)
            if record.error:
                await asyncio.sleep(0.5)  # do not hammer a failing server

    def pending() -> int:
        return sum(r.measured and r.end is None and r.error is None for r in records)

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    next_report = _REPORT_EVERY
    try:
        while True:
            await asyncio.sleep(0.1)
            elapsed = _now() - t0
            if (not issuing() and pending() == 0) or _now() - (window or [t0])[0] >= seconds + grace:
                break
            if elapsed >= next_report:
                done = sum(r.measured and r.end is not None for r in records)
                say(f"    c={concurrency} {elapsed:5.0f} s: {done}/{counters['measured']} measured done, "
                    f"{pending()} measured in flight{'' if issuing() else ', draining'}")
                next_report += _REPORT_EVERY
    finally:
        loaded, loading = _now() - t0, False
        for record in records:
            record.audio_when_loaded = record.audio_seconds
        _, running = await asyncio.wait(workers, timeout=grace)
        for task in running:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        for record in records:  # a measured stream that outlived the load stays cut off
            if record.measured and record.end is not None and record.end > loaded:
                record.end = None
    return LevelResult(concurrency, records, loaded)


async def _stats(server: Any) -> dict[str, dict[str, int]]:
    return flatten_stats(await server.get_inference_statistics(as_json=True))


async def _wait_idle(server: Any, quiet: float = 2.0, timeout: float = 60.0) -> dict[str, dict[str, int]]:
    """Statistics once no model's counters changed for ``quiet`` seconds (cancelled streams stop only
    between decoder calls), or after ``timeout``."""
    deadline = _now() + timeout
    last = await _stats(server)
    since = _now()
    while _now() < deadline and _now() - since < quiet:
        await asyncio.sleep(0.25)
        current = await _stats(server)
        if current != last:
            last, since = current, _now()
    return last


def read_gpu_memory(metrics_url: str | None, timeout: float = 5.0) -> float | None:
    """GPU memory in use on the server's GPUs (:func:`gpu_memory_bytes` of its metrics page); None without a metrics
    URL, GPU metrics or an answer."""
    if metrics_url is None:
        return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
    try:
        with opener.open(metrics_url, timeout=timeout) as response:
            return gpu_memory_bytes(response.read().decode())
    except (urllib.error.URLError, OSError):
        return None


def level_line(s: LevelSummary, runtime: str) -> str:
    """The progress line printed when a level ends."""
    return (f"  {runtime} c={s.concurrency}: {s.completed}/{s.measured} done ({s.errors} errors, {s.cut_off} cut "
            f"off) in {s.loaded_seconds:.0f} s; first chunk p50/p90/p99 {_num(s.first_chunk_p50)}/"
            f"{_num(s.first_chunk_p90)}/{_num(s.first_chunk_p99)} ms (opening burst p99 {_num(s.opening_p99)} ms); "
            f"RTF mean {_num(s.rtf_mean, 3)}; "
            f"{_num(s.audio_per_second, 1)} audio s/s; CPU busy {_num(s.cpu_busy)} % (bench {_num(s.cpu_own)} %)")


@dataclass(frozen=True)
class _AudioChunk:
    audio: Any
    sample_rate: int


class InProcessClient:
    """The part of :class:`~tts_triton.client.AsyncTTSClient` that :func:`run_level` uses (``stream(text)``), served
    in this process by :class:`~tts_triton.serving.service.TTSService` over ``backend``: the eager baseline. After
    every chunk the stream yields to the event loop, so that concurrent streams take turns chunk by chunk."""

    def __init__(self, service: Any, backend: Any) -> None:
        self.service = service
        self.backend = backend

    async def stream(self, text: str) -> AsyncIterator[_AudioChunk]:
        """The chunks of ``text`` with the default voice and emotion."""
        # the serving stack (espeak-ng front end): only the in-process baseline needs it
        from tts_triton.serving.service import SynthesisRequest

        async for chunk in self.service.stream(SynthesisRequest(text), self.backend):
            yield _AudioChunk(chunk.audio, audio.SAMPLE_RATE)
            await asyncio.sleep(0)


@dataclass(frozen=True)
class BaselinePlan:
    """How to measure the eager baseline: device, levels and the same per-level rules as the served levels."""

    device: str
    concurrency: tuple[int, ...]
    requests: int | None
    seconds: float
    grace: float
    warmup: int


def measure_baseline(plan: BaselinePlan) -> list[LevelResult]:
    """The eager baseline (see :class:`InProcessClient`): the default checkpoint's PyTorch stages (fp32, batch 1) on
    ``plan.device`` through ``TTSService``, at each of ``plan.concurrency``. main runs it in a child process, so
    that its device memory is released before the server's is measured."""
    # the model stack (torch): heavy, and not needed to benchmark a server
    from tts_triton.checkpoint import DEFAULT_VOICE_BANK, load_default
    from tts_triton.serving.backends import TorchBackend
    from tts_triton.serving.service import TTSService
    from tts_triton.voices import VoiceBank

    ckpt = load_default()
    backend = TorchBackend(ckpt.stages(), ckpt.config, device=plan.device)
    client = InProcessClient(TTSService(ckpt.config, VoiceBank.load(DEFAULT_VOICE_BANK)), backend)
    return asyncio.run(_baseline_levels(client, plan, f"eager {plan.device}"))


async def _baseline_levels(client: InProcessClient, plan: BaselinePlan, runtime: str) -> list[LevelResult]:
    def say(message: str) -> None:
        print(message, flush=True)

    await _warm_up(client, plan.warmup, say)
    levels = []
    for concurrency in plan.concurrency:
        requests = measured_requests(plan.requests, concurrency)
        say(f"{runtime} c={concurrency}: up to {requests} measured requests started within {plan.seconds:g} s")
        cpu_before = CpuSample.read()
        level = await run_level(client, concurrency, requests, plan.seconds, plan.grace, say)
        level.cpu_busy, level.cpu_steal, level.cpu_own = CpuSample.usage(cpu_before, CpuSample.read())
        levels.append(level)
        say(level_line(summarize(level), runtime))
    return levels


async def _warm_up(client: Any, requests: int, say: Callable[[str], None]) -> None:
    from tts_triton.client import TTSError

    for i in range(requests):
        record = RequestRecord(index=i, measured=False, start=0.0)
        await _one_stream(client, record, _now())
        if record.error:
            raise TTSError(f"warm-up request failed: {record.error}")
        say(f"warm-up {i + 1}/{requests}: {record.audio_seconds:.1f} s of audio in {record.end or math.nan:.2f} s")


async def run_soak(client: Any, concurrency: int, requests: int, seconds: float, grace: float,
                   metrics_url: str | None, every: float, clock: Callable[[], float],
                   say: Callable[[str], None]) -> tuple[LevelResult, list[MemorySample]]:
    """``requests`` measured requests at ``concurrency`` (:func:`run_level`, all started within ``seconds``) while
    GPU memory is sampled every ``every`` seconds (``clock()``: seconds since the benchmark started)."""
    samples: list[MemorySample] = []

    async def sample() -> None:
        while True:
            samples.append(MemorySample("soak", clock(), await asyncio.to_thread(read_gpu_memory, metrics_url)))
            await asyncio.sleep(every)

    sampler = asyncio.create_task(sample())
    try:
        level = await run_level(client, concurrency, requests, seconds, grace, say)
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    samples.append(MemorySample("soak end", clock(), await asyncio.to_thread(read_gpu_memory, metrics_url)))
    return level, samples


# --------------------------------------------------------------------------- describing the setup


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def describe_gpus() -> str:
    """The GPUs ``nvidia-smi`` lists (name, memory, driver), or '' where there is none."""
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                                 "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    return f"{len(lines)}: " + "; ".join(lines) if lines else ""


def describe_machine() -> list[tuple[str, str]]:
    """CPU model, cores, virtualisation, GPUs, memory, OS and the client-side package versions."""
    cpuinfo = _read("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    kind = "virtual machine (hypervisor flag set in /proc/cpuinfo)" if " hypervisor" in flags else "no hypervisor flag"
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                   if line.startswith("MemTotal:")), 0)
    os_name = next((line.split("=", 1)[1].strip().strip('"') for line in _read("/etc/os-release").splitlines()
                    if line.startswith("PRETTY_NAME=")), platform.system())
    return [
        ("CPU", f"{model}; {os.cpu_count()} logical CPUs ({usable} usable by this process); {kind}"),
        *([("GPU", gpus)] if (gpus := describe_gpus()) else []),
        ("Memory", f"{mem_kb / 2**20:.1f} GiB" if mem_kb else "unknown"),
        ("OS", f"{os_name}, kernel {platform.release()}"),
        ("Python", platform.python_version()),
        ("Packages", ", ".join(f"{p} {_version(p)}" for p in ("onnxruntime", "tritonclient", "nvidia-pytriton",
                                                                "numpy", "torch"))),
    ]


@dataclass(frozen=True)
class ServerInfo:
    """What the report says about the server: (label, value) facts, whether the weights are trained (None:
    unknown), the network settings from ``repository.json`` (embedded server only) and the ``tts`` parameters."""

    facts: list[tuple[str, str]]
    trained: bool | None
    settings: dict[str, Any]
    parameters: dict[str, str]


async def describe_server(server: Any, url: str, repository: Path | None) -> ServerInfo:
    """Ask the server (metadata, ``tts`` config) and read the repository's manifest when there is one."""
    meta = await server.get_server_metadata(as_json=True)
    config = (await server.get_model_config(TTS, as_json=True)).get("config", {})
    params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
    info = json.loads(params.get("voice_bank", "{}")).get("info", {})
    trained = info.get("trained")
    facts = [
        ("Triton", f"{meta.get('name', 'triton')} {meta.get('version', '?')} at {url}"
                   + (" (embedded server started by the bench)" if repository else "")),
        ("Checkpoint", f"`{params.get('checkpoint_name') or info.get('checkpoint', '?')}`, trained: "
                       + {True: "yes", False: "**no**"}.get(trained, "unknown")),
    ]
    settings: dict[str, Any] = {}
    manifest_path = repository / "repository.json" if repository else None
    if manifest_path and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        facts.append(("Repository", f"`{repository}`, target `{manifest.get('target')}`, built "
                                    f"{manifest.get('built_at', '?')}, checkpoint sha256 "
                                    f"{manifest.get('checkpoint_sha256', '?')[:12]}"))
        served = manifest.get("settings", {})
        settings = served.get("networks", {})
        steps = served.get("steps_per_call") or "the checkpoint's"
        facts.append(("BLS", f"{served.get('bls_instances', '?')} instance(s) of `tts`; decoder steps per call: "
                             f"{steps}"))
    return ServerInfo(facts, trained, settings, params)


def sentence_rows(levels: Sequence[LevelResult], model_config: str) -> list[tuple[str, str, str, str, str]]:
    """The sentence table: kind, text, phoneme ids, audio seconds at the max-steps guard, median measured audio."""
    from tts_triton.text.frontend import text_to_sequences

    decoder = ModelConfig.from_dict(json.loads(model_config)).decoder if model_config else None
    rows = []
    for i, (kind, text) in enumerate(SENTENCES):
        ids = [len(seq) for seq in text_to_sequences(text)]
        guard = (sum(decoder.max_steps(n) for n in ids) * decoder.frames_per_step * audio.HOP_LENGTH
                 / audio.SAMPLE_RATE) if decoder else math.nan
        heard = [r.audio_seconds for level in levels for r in level.records
                 if r.measured and r.ok and r.index % len(SENTENCES) == i]
        rows.append((kind, text, "+".join(map(str, ids)), _num(guard, 2), _num(percentile(heard, 50), 2)))
    return rows


# --------------------------------------------------------------------------- plot


def plot(summaries: Sequence[LevelSummary], baseline: Sequence[LevelSummary], path: Path, title: str) -> None:
    """Three panels against concurrency (log scales): first-chunk p50/p99, RTF, aggregate x real time; the eager
    baseline's levels as dashed grey reference lines."""
    from matplotlib.ticker import FormatStrFormatter  # optional heavy dependency (the dev/loadtest extras)

    fig, axes = pyplot().subplots(1, 3, figsize=(14, 4.2))
    panels = (
        (axes[0], "first-chunk latency", "ms", (("p50", "first_chunk_p50", "o"), ("p99", "first_chunk_p99", "^"))),
        (axes[1], "real-time factor (total time / audio s)", "", (("mean", "rtf_mean", "o"),)),
        (axes[2], "throughput", "x real time (audio s / s)", (("aggregate", "audio_per_second", "o"),)),
    )
    for ax, name, unit, series in panels:
        for label, attr, marker in series:
            for levels, style in ((summaries, {}), (baseline, {"linestyle": "--", "color": "grey"})):
                points = [(s.concurrency, getattr(s, attr)) for s in levels if getattr(s, attr) > 0]
                if points:  # log axes: NaN and zero (nothing measured) are left out
                    ax.plot(*zip(*points, strict=True), marker=marker, **style,
                            label=label if levels is summaries else f"eager {label}")
        ax.set_title(name)
        ax.set_ylabel(unit)
        ax.set_yscale("log")
    axes[1].axhline(1.0, color="black", linestyle=":", linewidth=1, label="real time")
    ticks = sorted({s.concurrency for s in [*summaries, *baseline]}) or [1]
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(c) for c in ticks])
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.set_xlabel("concurrent streams")
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)


# --------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tts-triton bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="gRPC address host:port of a running server (default: start the embedded server "
                                 "on free loopback ports and stop it afterwards)")
    p.add_argument("--metrics-url", help="with --url: the server's Prometheus metrics page, for GPU memory "
                                         "(e.g. http://localhost:8002/metrics)")
    p.add_argument("--model-repository", type=Path, default=default_model_repository(),
                   help="repository the embedded server serves, built if needed (default %(default)s)")
    p.add_argument("--target", default="onnxruntime-python",
                   help="runtime target the embedded server's repository is built for (default %(default)s; "
                        "torch-cuda needs a CUDA GPU)")
    p.add_argument("--triton-home", type=Path, default=os.environ.get("TRITON_HOME") or None,
                   help="an unpacked Triton bundle (bin/, backends/python/, stub/, libs/, caches/; "
                        "scripts/gpu/gpu-env.sh exports it as TRITON_HOME) to run instead of the nvidia-pytriton "
                        "wheel's server (default: $TRITON_HOME if set)")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16],
                   help=f"levels, 1-{MAX_CONCURRENCY} (default 1 4 16)")
    p.add_argument("--requests", type=int,
                   help="measured requests per level at most (default 8 x concurrency, at least 32)")
    p.add_argument("--seconds", type=float, default=30.0,
                   help="per level, measured requests start only during this many seconds (default %(default)s)")
    p.add_argument("--grace", type=float, default=90.0,
                   help="per level, seconds after --seconds for measured requests to finish before they are "
                        "cancelled (default %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests, one at a time (default %(default)s)")
    p.add_argument("--baseline-device", default="auto", choices=("auto", "cuda", "cpu", "none"),
                   help="device of the eager PyTorch baseline measured in the same run (auto: cuda when available, "
                        "else none)")
    p.add_argument("--baseline-concurrency", type=int, nargs="+", default=[1, 64],
                   help="the baseline's levels (default 1 64)")
    p.add_argument("--mps", action="store_true",
                   help="run the embedded server's CUDA processes under an MPS daemon of its own (as serve --mps)")
    p.add_argument("--soak", type=int, default=0, metavar="N",
                   help="after the sweep, N requests at the best concurrency with GPU memory sampled (default 0: no "
                        "soak)")
    p.add_argument("--soak-seconds", type=float, default=300.0,
                   help="the soak's requests start within this many seconds (default %(default)s)")
    p.add_argument("--memory-every", type=float, default=5.0,
                   help="seconds between GPU memory samples during the soak (default %(default)s)")
    p.add_argument("--out", type=Path, default=Path("runs/bench/BENCHMARKS.md"),
                   help="Markdown report, rewritten after every level (default %(default)s)")
    p.add_argument("--plot", type=Path, default=Path("runs/bench/concurrency.png"),
                   help="PNG plot (default %(default)s)")
    p.add_argument("--json", type=Path, help="also dump every raw number as JSON here, rewritten after every level")
    p.add_argument("--reference", type=Path,
                   help="the --json dump of an earlier run (one GPU) whose best aggregate this run's is compared with "
                        "(issue 12: two GPUs >= 1.8x one)")
    return p


@dataclass(frozen=True)
class Target:
    """The server under test: its gRPC address, metrics page and, for the embedded server, its repository, process
    group and runtime target."""

    url: str
    metrics_url: str | None = None
    repository: Path | None = None
    process_group: int | None = None
    runtime: str = "triton"


def bundle_install(home: Path) -> TritonInstall:
    """The :class:`~tts_triton.server.TritonInstall` of a Triton bundle unpacked at ``home`` (the layout
    ``/work/shared/gpu/make-bundle.sh`` packs: bin/, backends/python/, stub/, libs/, caches/)."""
    install = TritonInstall(version="bundle", server=home / "bin" / "tritonserver",
                            python_backend=home / "backends" / "python",
                            stub=home / "stub" / "triton_python_backend_stub", libs=home / "libs",
                            caches=home / "caches")
    if missing := install.missing():
        raise TritonNotFoundError(f"the Triton bundle at {home} is incomplete, missing: "
                                  + ", ".join(str(path) for path in missing))
    return install


def _needs_cuda(target: str) -> bool:
    from tts_triton.export.repository import KIND_GPU, RUNTIME_TARGETS

    runtime = RUNTIME_TARGETS.get(target)
    return target == "torch-cuda" or (runtime is not None and runtime.instance_kind == KIND_GPU)


def _cuda_available() -> bool:
    import torch  # optional heavy dependency (the model extra); only asked when a GPU is asked for

    return torch.cuda.is_available()


@contextlib.contextmanager
def _server(args: argparse.Namespace, say: Callable[[str], None]) -> Iterator[Target]:
    """``--url``, or the embedded server on free loopback ports for the duration of the block."""
    if args.url:
        yield Target(args.url, args.metrics_url)
        return
    from tts_triton.build import ensure_repository

    if _needs_cuda(args.target) and not _cuda_available():
        raise TritonServerError(f"--target {args.target} needs a CUDA GPU, and torch sees none on this host")
    try:
        repository = ensure_repository(args.model_repository, target=args.target)
    except ValueError as err:  # an unknown target, a checkpoint that does not fit
        raise TritonServerError(f"cannot build {args.model_repository}: {err}") from None
    server = embedded_server(repository, args.triton_home, mps=args.mps)
    say(f"starting the embedded tritonserver{f' from {args.triton_home}' if args.triton_home else ''} "
        f"(log: {server.log_file}) ...")
    with server:
        yield Target(server.grpc_url, server.metrics_url, repository, server.pid, f"triton {args.target}")


def embedded_server(repository: Path, triton_home: Path | None = None, **options: Any) -> TritonServer:
    """A server (not started) for ``repository`` on three free loopback ports: nvidia-pytriton's Triton, or the
    bundle unpacked at ``triton_home`` (a GPU host); ``options`` go to :class:`~tts_triton.server.TritonServer`."""
    http, grpc, metrics = free_ports(3)
    if triton_home:
        return BundleServer(repository.resolve(), http_port=http, grpc_port=grpc, metrics_port=metrics,
                            install=bundle_install(triton_home), **options)
    return TritonServer(repository.resolve(), http_port=http, grpc_port=grpc, metrics_port=metrics, **options)


class BundleServer(TritonServer):
    """A :class:`~tts_triton.server.TritonServer` run from a Triton bundle on a host set up by
    ``scripts/gpu/gpu-env.sh``: ``LD_LIBRARY_PATH`` is the bundle's libraries plus the caller's (where gpu-env put
    libpython alone), without the interpreter's LIBDIR, a system folder there whose cuDNN would shadow PyTorch's."""

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(self.install.libs),
                                                               os.environ.get("LD_LIBRARY_PATH")]))
        return env


@dataclass
class _Run:
    """One benchmark run in progress: the arguments, the report being filled in, the served model config (for the
    sentence table) and the plot's title."""

    args: argparse.Namespace
    report: Report
    model_config: str
    title: str
    started: float = field(default_factory=_now)
    say: Callable[[str], None] = print

    def clock(self) -> float:
        """Seconds since the run started."""
        return _now() - self.started

    def publish(self) -> None:
        """(Re)write the Markdown report, the plot and the JSON dump with what has been measured so far."""
        r, args = self.report, self.args
        r.sentences = sentence_rows([*r.levels, *r.baseline], self.model_config)
        plot([summarize(level) for level in r.levels], [summarize(level) for level in r.baseline], args.plot,
             self.title)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(render_markdown(r))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(report_json(r))

    async def memory(self, label: str, metrics_url: str | None) -> None:
        """Append a GPU memory sample to the report."""
        used = await asyncio.to_thread(read_gpu_memory, metrics_url)
        self.report.memory.append(MemorySample(label, self.clock(), used))
        self.say(f"  GPU memory {label}: " + ("n/a (no GPU metrics)" if used is None else _gib(used)))


def measured_requests(cap: int | None, concurrency: int) -> int:
    """Measured requests of a level: ``cap``, else 8 per stream but at least 32 (a p99 needs some)."""
    return cap or max(32, 8 * concurrency)


async def _sweep(run: _Run, server: Any, client: Any, target: Target) -> None:
    args = run.args
    for concurrency in args.concurrency:
        before = await _wait_idle(server)
        cpu_before = CpuSample.read(target.process_group)
        requests = measured_requests(args.requests, concurrency)
        run.say(f"level c={concurrency}: up to {requests} measured requests started within {args.seconds:g} s")
        level = await run_level(client, concurrency, requests, args.seconds, args.grace, run.say)
        level.cpu_busy, level.cpu_steal, level.cpu_own = CpuSample.usage(cpu_before,
                                                                          CpuSample.read(target.process_group))
        level.models = diff_stats(before, await _wait_idle(server))
        run.report.levels.append(level)
        run.say(level_line(summarize(level), target.runtime))
        await run.memory(f"after c={concurrency}", target.metrics_url)
        run.publish()


async def _soak(run: _Run, server: Any, client: Any, target: Target) -> None:
    args = run.args
    summaries = [summarize(level) for level in run.report.levels]
    best = best_level(summaries, TARGETS.best_p99_ms) or max(summaries, key=lambda s: s.audio_per_second,
                                                               default=None)
    concurrency = best.concurrency if best else args.concurrency[-1]
    run.say(f"soak: {args.soak} requests at c={concurrency}, GPU memory every {args.memory_every:g} s")
    before = await _wait_idle(server)
    cpu_before = CpuSample.read(target.process_group)
    level, samples = await run_soak(client, concurrency, args.soak, args.soak_seconds, args.grace, target.metrics_url,
                                    args.memory_every, run.clock, run.say)
    level.cpu_busy, level.cpu_steal, level.cpu_own = CpuSample.usage(cpu_before, CpuSample.read(target.process_group))
    level.models = diff_stats(before, await _wait_idle(server))
    run.report.soak, run.report.soak_memory = level, samples
    trend = MemoryTrend.of(samples)
    growth = f"{trend.growth / 2**20:+,.0f} MiB" if trend else "n/a"
    run.say(f"{level_line(summarize(level), 'soak')}; GPU memory growth {growth}")
    run.publish()


async def _bench(run: _Run, target: Target) -> None:
    """Describe the server into ``run.report``, then warm-up, sweep and soak, publishing after every step."""
    import tritonclient.grpc.aio as grpcclient_aio

    from tts_triton.client import AsyncTTSClient

    server = grpcclient_aio.InferenceServerClient(target.url)
    try:
        info = await describe_server(server, target.url, target.repository)
        if info.trained is not True:
            run.say("note: the served weights are not trained; see the report")
        report = run.report
        report.server, report.trained, report.settings = info.facts, info.trained, info.settings
        report.runtime = target.runtime
        run.model_config = info.parameters.get("model_config", "")
        run.title = (f"tts over gRPC ({target.runtime}), checkpoint {info.parameters.get('checkpoint_name', '?')}"
                     f"{'' if info.trained else ' (UNTRAINED)'}, {report.date}")
        await run.memory("start", target.metrics_url)
        run.publish()
        async with AsyncTTSClient(target.url) as client:
            await _warm_up(client, run.args.warmup, run.say)
            await _sweep(run, server, client, target)
            if run.args.soak:
                await _soak(run, server, client, target)
        await run.memory("end", target.metrics_url)
        run.publish()
    finally:
        await server.close()


def _baseline_device(choice: str) -> str | None:
    """The eager baseline's device for ``--baseline-device``; raises ValueError for cuda on a host without CUDA."""
    if choice == "none":
        return None
    if choice == "cpu":
        return "cpu"
    available = _cuda_available()
    if choice == "cuda" and not available:
        raise ValueError("--baseline-device cuda: torch sees no CUDA GPU on this host (use cpu or none)")
    return "cuda" if available else None


def run_baseline(args: argparse.Namespace, device: str, say: Callable[[str], None]) -> tuple[list[LevelResult], str]:
    """:func:`measure_baseline` in a child process (its device memory is gone when it exits): (levels, '') or, when
    it failed, ([], what went wrong), so that the served levels are still measured."""
    plan = BaselinePlan(device, tuple(args.baseline_concurrency), args.requests, args.seconds, args.grace,
                        args.warmup)
    say(f"eager baseline on {device} at c={' '.join(map(str, plan.concurrency))} (in a child process) ...")
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(measure_baseline, plan).result(), ""
    except Exception as err:  # anything the child raised, or its death: reported, and the run goes on
        say(f"error: the eager baseline failed: {type(err).__name__}: {err}")
        return [], f"**The eager baseline on {device} failed**: `{type(err).__name__}: {err}`"


def _check(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, or None."""
    levels = [*args.concurrency, *args.baseline_concurrency]
    if any(not 1 <= c <= MAX_CONCURRENCY for c in levels):
        return f"concurrency levels must be 1-{MAX_CONCURRENCY}"
    if args.seconds <= 0 or args.grace < 0 or args.warmup < 0 or args.soak < 0 or args.memory_every <= 0:
        return "--seconds and --memory-every must be positive, --grace, --warmup and --soak not negative"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); returns the exit status: 0, 1 if any request failed, 2 if
    the server could not be started or reached or the baseline device is missing."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join(["tts-triton", "bench", *argv])
    args = parser().parse_args(argv[1:] if argv[:1] == ["--"] else argv)  # `tts-triton bench -- --help`
    if problem := _check(args):
        parser().error(problem)

    def say(message: str) -> None:
        print(message, flush=True)

    from tritonclient.utils import InferenceServerException

    from tts_triton.client import TTSError

    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    try:
        device = _baseline_device(args.baseline_device)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if device is None:
        say("eager baseline: not measured (--baseline-device none, or auto without CUDA)")
    try:
        reference = reference_level(args.reference.read_text()) if args.reference else None
    except (OSError, ValueError, KeyError, TypeError) as err:
        parser().error(f"--reference {args.reference}: not a bench --json dump ({type(err).__name__}: {err})")
    levels, failure = run_baseline(args, device, say) if device else ([], "")
    report = Report(date=date, command=command, machine=describe_machine(), server=[], trained=None, settings={},
                    levels=[], sentences=[], plot=os.path.relpath(args.plot.resolve(), args.out.resolve().parent),
                    warmup=args.warmup, seconds=args.seconds, grace=args.grace, baseline=levels,
                    baseline_runtime=f"eager {device}", notes=[failure] if failure else [], reference=reference)
    run = _Run(args, report, model_config="", title=f"tts over gRPC, {date}", say=say)
    if device:
        run.publish()  # the baseline is kept even if the server never comes up
    try:
        with _server(args, say) as target:
            asyncio.run(_bench(run, target))
    except (InferenceServerException, TTSError, TritonServerError) as err:
        print(f"error: benchmark of {args.url or 'the embedded server'} failed: {err}", file=sys.stderr)
        return 2
    print("\n" + text_table(LEVEL_HEADERS, [level_row(s, r) for r, s in report.rows()]))
    for level in report.levels:
        print(f"\nconcurrency {level.concurrency}:\n" + text_table(MODEL_HEADERS, [model_row(m) for m in level.models]))
    print(f"\nwrote {args.out}, {args.plot}" + (f" and {args.json}" if args.json else ""))
    return 1 if any(r.error for level in report.levels for r in level.records) else 0


if __name__ == "__main__":
    raise SystemExit(main())
