"""The bench report: its tables, its prose, and the JSON dump of every raw number (pure)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tts_triton.bench.goals import Ceiling, Goals, RunNumbers
from tts_triton.bench.prometheus import CACHE_LOOKUPS_METRIC, GPU_MEMORY_METRIC
from tts_triton.bench.stats import (
    BEST_P99_MS,
    COMPUTE_PARTS,
    LevelResult,
    LevelSummary,
    MemorySample,
    MemoryTrend,
    ModelDelta,
    baseline_pairs,
    best_level,
    ratio,
    summarize,
)
from tts_triton.jobs.tables import markdown_table

__all__ = [
    "CPU_HEADERS",
    "LEVEL_HEADERS",
    "MODEL_HEADERS",
    "OPENING_HEADERS",
    "RATIO_HEADERS",
    "Report",
    "cpu_row",
    "level_line",
    "level_row",
    "model_row",
    "opening_row",
    "ratio_row",
    "read_bench_text",
    "reference_level",
    "render_markdown",
    "report_json",
]

LEVEL_HEADERS = ("runtime", "concurrency", "measured", "done", "errors", "cut off", "first chunk p50 ms", "p90 ms",
                 "p99 ms", "RTF mean", "RTF p90", "audio s / s", "requests / s", "loaded s", "CPU busy %",
                 "of which bench %", "server CPU ms / audio s", "repeats %", "cache hit %")
#: The server's CPU per second of audio by process group (:data:`~tts_triton.bench.stats.CPU_GROUPS`).
CPU_HEADERS = ("runtime", "concurrency", "audio s / s", "server core-ms / audio s", "BLS stubs", "network stubs",
               "tritonserver")
MODEL_HEADERS = ("model", "requests", "rows", "failures", "executions", "avg batch", "queue ms / req",
                 "compute ms / req", "of which input", "infer", "output")
OPENING_HEADERS = ("runtime", "concurrency", "first chunk p50 ms", "p99 ms")
RATIO_HEADERS = ("concurrency", "served x real time", "eager x real time", "throughput served / eager",
                 "served RTF", "eager RTF", "RTF eager / served", "first chunk p50 ms served", "eager")
_UNEVEN_LOAD = 10.0  # percentage points of other processes' CPU share between levels that void the comparison


def _num(value: float, digits: int = 0) -> str:
    return "–" if math.isnan(value) else f"{value:,.{digits}f}"


def level_row(s: LevelSummary, runtime: str) -> list[str]:
    """One row of the levels table (headers :data:`LEVEL_HEADERS`)."""
    return [runtime, str(s.concurrency), str(s.measured), str(s.completed), str(s.errors), str(s.cut_off),
            _num(s.first_chunk_p50, 1), _num(s.first_chunk_p90, 1), _num(s.first_chunk_p99, 1), _num(s.rtf_mean, 3),
            _num(s.rtf_p90, 3), _num(s.audio_per_second, 2), _num(s.requests_per_second, 3),
            _num(s.loaded_seconds, 1), _num(s.cpu_busy), _num(s.cpu_own), _num(s.server_cpu_ms, 2), _num(s.repeat_pct),
            _num(s.cache_hit_pct)]


def cpu_row(s: LevelSummary, runtime: str) -> list[str]:
    """One row of the server-CPU table (headers :data:`CPU_HEADERS`)."""
    return [runtime, str(s.concurrency), _num(s.audio_per_second, 1),
            *(_num(v, 2) for v in (s.server_cpu_ms, s.bls_cpu_ms, s.networks_cpu_ms, s.tritonserver_cpu_ms))]


def opening_row(s: LevelSummary, runtime: str) -> list[str]:
    """One row of the opening-burst table (headers :data:`OPENING_HEADERS`)."""
    return [runtime, str(s.concurrency), _num(s.opening_p50, 1), _num(s.opening_p99, 1)]


def model_row(m: ModelDelta) -> list[str]:
    """One row of a per-model statistics table (headers :data:`MODEL_HEADERS`)."""
    return [m.name, str(m.requests), str(m.rows), str(m.failures), str(m.executions), _num(m.avg_batch, 2),
            _num(m.queue_ms, 2), _num(m.compute_ms, 2), *(_num(m.per_request_ms(part), 2) for part in COMPUTE_PARTS)]


def ratio_row(served: LevelSummary, eager: LevelSummary) -> list[str]:
    """One row of the baseline comparison (headers :data:`RATIO_HEADERS`); ratios above 1 favour the server."""
    return [str(served.concurrency), _num(served.audio_per_second, 1), _num(eager.audio_per_second, 1),
            _num(ratio(served.audio_per_second, eager.audio_per_second), 1) + "x", _num(served.rtf_mean, 4),
            _num(eager.rtf_mean, 4), _num(ratio(eager.rtf_mean, served.rtf_mean), 1) + "x",
            _num(served.first_chunk_p50, 1), _num(eager.first_chunk_p50, 1)]


def level_line(s: LevelSummary, runtime: str) -> str:
    """The progress line printed when a level ends."""
    cache = "" if math.isnan(s.cache_hit_pct) else f"; cache hits {_num(s.cache_hit_pct)} %"
    return (f"  {runtime} c={s.concurrency}: {s.completed}/{s.measured} done ({s.errors} errors, {s.cut_off} cut "
            f"off) in {s.loaded_seconds:.0f} s; first chunk p50/p90/p99 {_num(s.first_chunk_p50)}/"
            f"{_num(s.first_chunk_p90)}/{_num(s.first_chunk_p99)} ms (opening burst p99 {_num(s.opening_p99)} ms); "
            f"RTF mean {_num(s.rtf_mean, 3)}; "
            f"{_num(s.audio_per_second, 1)} audio s/s; CPU busy {_num(s.cpu_busy)} % (bench {_num(s.cpu_own)} %); "
            f"server CPU {_num(s.server_cpu_ms, 2)} core-ms per audio s" + cache)


def read_bench_text(path: Path) -> str:
    """A ``bench.json``'s text, read as the bench wrote it or gzip-compressed (a name ending in ``.gz``: how the
    repository keeps a run's, docs/records/bench/h200/)."""
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def reference_level(report_json_text: str, p99_ms: float) -> LevelSummary | None:
    """The best served level (:func:`~tts_triton.bench.stats.best_level`) of an earlier run's ``--json`` dump."""
    levels = json.loads(report_json_text)["summaries"]["levels"]
    return best_level([LevelSummary(**{k: math.nan if v is None else v for k, v in level.items()})
                       for level in levels], p99_ms)


@dataclass
class Report:
    """What the Markdown report is made of; the CLI fills it in level by level. ``machine`` and ``server`` are
    (label, value) pairs; ``sentences`` rows are (kind, text, phoneme ids, max-steps guard audio s, median measured
    audio s). ``runtime`` names the served levels' runtime, ``baseline_runtime`` the eager baseline's; ``memory``
    holds the GPU memory samples of the sweep, ``soak_memory`` those of the soak; ``notes`` go above the results;
    ``reference`` is the best level of an earlier run (``--reference``); ``goals`` (from ``goals_file``) are
    judged at the end when given; ``ceiling`` is the in-process ceiling measured beside the run (``--ceiling``)."""

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
    goals: Goals | None = None
    goals_file: str = ""
    ceiling: Ceiling | None = None

    def rows(self) -> list[tuple[str, LevelSummary]]:
        """(runtime, summary) of every level: served, eager baseline, soak."""
        return ([(self.runtime, summarize(level)) for level in self.levels]
                + [(self.baseline_runtime, summarize(level)) for level in self.baseline]
                + ([(f"{self.runtime}, soak", summarize(self.soak))] if self.soak else []))

    def numbers(self) -> RunNumbers:
        """What the goals are judged on."""
        served = [*self.levels, *([self.soak] if self.soak else [])]
        return RunNumbers([summarize(level) for level in self.levels], [summarize(level) for level in self.baseline],
                          MemoryTrend.of([*self.memory, *self.soak_memory]), MemoryTrend.of(self.soak_memory),
                          sum(r.measured for r in self.soak.records) if self.soak else 0, self.reference, self.ceiling,
                          sum(r.error is not None for level in served for r in level.records),
                          sum(len(level.records) for level in served))


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
        f"Generated by `tts-triton bench` on {report.date}. Command:\n\n```\n{report.command}\n```\n\n",
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


def _clients(report: Report) -> str:
    """The client processes P of the levels, e.g. "P = 1 at C = 1, 8, 32, 2 at C = 64, 4 at C = 128, 256"."""
    by_processes: dict[int, list[int]] = {}
    for level in [*report.levels, *([report.soak] if report.soak else [])]:
        levels = by_processes.setdefault(level.clients, [])
        if level.concurrency not in levels:
            levels.append(level.concurrency)
    if not by_processes:
        return "P = 1"
    return "P = " + ", ".join(f"{p} at C = {', '.join(map(str, sorted(cs)))}" for p, cs in by_processes.items())


def _method_section(report: Report) -> list[str]:
    return [
        "\n## Method\n\n",
        f"- Warm-up: {report.warmup} request(s) one at a time (the first sentences of the set), not measured.\n",
        "- Per concurrency C: C closed-loop workers (one gRPC stream per request, no think time) in P client "
        "processes on this machine, each with its own `AsyncTTSClient` and C/P of the workers, started at one "
        f"instant ({_clients(report)}), so that the load generator's own Python is not the wall. Each worker's "
        "first request is not measured: the C streams open at the same instant, a burst that a "
        "steady load never sees (its first-chunk latency is reported apart, under *Opening burst*). The requests "
        f"started from then on, within {report.seconds:g} s of the first of them (up to `--requests` if given; at "
        "least 32, however long they take), are measured: the load is held for that window at every level, so one "
        "hiccup moves a level's result little; then "
        f"unmeasured filler requests keep C streams in flight until every measured one finished (at most "
        f"{report.grace:g} s more; measured requests still running then are counted as *cut off*). That ends the "
        f"load; the streams still open may then finish unmeasured within {report.grace:g} s (only what runs after "
        "that is cancelled: Triton 2.51 can crash on cancels, server#7840).\n",
        "- Requests cycle through the sentence set below in order, with the server's default voice and emotion. "
        "With `--repeat-ratio R`, each request instead repeats, with probability R, a text of this run whose "
        "synthesis completed, and otherwise speaks a new text (the sentence of the cycle followed by a four-word "
        "code): *repeats %* is the measured requests' actual share, *cache hit %* the server's utterance-cache hits "
        f"among its lookups during the level (Triton's `{CACHE_LOOKUPS_METRIC}`; – when it counts none).\n",
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
        "the benchmark itself (the embedded server's process group and the client processes, which run on the same "
        "machine); the rest was used by other processes. *Server CPU ms / audio s*: the embedded server's processes' "
        "CPU time (`/proc/PID/stat`) over the level, from its first request to its last response, per second of "
        "audio received in that span: the cost of serving, whatever else shares the machine.\n",
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
    cpu = [cpu_row(s, r) for r, s in report.rows() if not math.isnan(s.server_cpu_ms)]
    if cpu:
        parts += ["### Server CPU per second of audio\n\n",
                  "CPU core-milliseconds the server's processes used over each level per second of audio the streams "
                  "received (fillers' included; the load generator's processes excluded), by kind: the BLS models' "
                  "Python stubs (`tts`, `tts_offline`), the network models' stubs, tritonserver itself.\n\n",
                  markdown_table(CPU_HEADERS, cpu, left=1), "\n\n"]
    parts += ["### Opening burst\n\n",
              "Each level's first C requests, sent at the same instant (not measured above): a burst of C new "
              "listeners.\n\n",
              markdown_table(OPENING_HEADERS, [opening_row(s, r) for r, s in report.rows()], left=1), "\n\n"]
    pairs = baseline_pairs(served, baseline)
    if pairs:
        parts += ["### Against the eager baseline (same run)\n\n",
                  markdown_table(RATIO_HEADERS, [ratio_row(s, b) for s, b in pairs]), "\n\n"]
    if report.ceiling is not None:
        c = report.ceiling
        best = best_level(served, BEST_P99_MS)
        parts += ["### Against the in-process ceiling\n\n",
                  f"The served networks' device calls alone, one after another (`scripts/gpu/probe/ceiling.py`, on "
                  f"{c.device}, beside this run): {c.x_real_time:,.0f}x real time at {c.streams} streams. ",
                  (f"The best level with a first-chunk p99 <= {BEST_P99_MS:g} ms, {best.audio_per_second:,.0f}x at "
                   f"concurrency {best.concurrency}, is {100 * ratio(best.audio_per_second, c.x_real_time):.0f} % of "
                   "it.\n\n") if best else f"No level had a first-chunk p99 <= {BEST_P99_MS:g} ms.\n\n"]
    parts += _memory_section(report)
    if report.goals is not None:
        parts += [f"### Goals (from `{report.goals_file}`)\n\n",
                  markdown_table(("goal", "measured", "met"), report.goals.rows(report.numbers()), left=3), "\n\n"]
    parts.append("### Per-model Triton statistics, per level\n\n")
    for level in [*report.levels, *([report.soak] if report.soak else [])]:
        repeats = "" if level.repeat_ratio is None else f", repeat ratio {level.repeat_ratio:g}"
        parts += [f"Concurrency {level.concurrency}{repeats}{' (soak)' if level is report.soak else ''}:\n\n",
                  markdown_table(MODEL_HEADERS, [model_row(m) for m in level.models]), "\n\n"]
        if level.cpu_processes:
            parts.append(f"CPU by process over the level, % of one core (processes): {cpu_processes_line(level)}\n\n")
    errors = sorted({r.error for level in [*report.levels, *report.baseline] for r in level.records if r.error})
    if errors:
        parts += ["### Errors\n\n", "".join(f"- `{e}`\n" for e in errors[:10]), "\n"]
    return parts


def cpu_processes_line(level: LevelResult) -> str:
    """The level's CPU by process kind, busiest first: ``stub tts 742 (8), tritonserver 160 (1), ...``."""
    return ", ".join(f"{kind} {share:,.0f} ({count})" for kind, (count, share) in level.cpu_processes.items())


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
        "runs in the background, so its compute time is not the stream's duration. A sentence's first decoder call "
        "is one `first_decode` request (the ensemble of `text_encoder` and `decoder`, whose statistics count it "
        "too); `encode` (and `style_encoder`) run only for requests with reference audio.\n",
        "- *rows* are the batch rows the requests carried: the BLS sends the calls its streams make together as "
        "one request (`tts_triton.serving.coalesce`). *avg batch* is rows per execution. compute ms / req counts "
        "an execution's time once per request in it, so the model was busy about compute ms / req × executions. "
        "It splits into Triton's *input* (gathering the batch's inputs), *infer* (the model's `execute`; for a "
        "Python model, with the hand-over to its stub process) and *output* (its responses).\n",
    ]


def render_markdown(report: Report) -> str:
    """The whole report text for ``report`` (any part may still be empty: it is rewritten after each level)."""
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
