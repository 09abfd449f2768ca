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

Writes a Markdown report (default ``runs/bench/BENCHMARKS.md``) and a PNG plot (default ``runs/bench/concurrency.png``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tts_triton.paths import default_model_repository

__all__ = [
    "SENTENCES",
    "CpuSample",
    "LevelResult",
    "LevelSummary",
    "ModelDelta",
    "Report",
    "RequestRecord",
    "ServerInfo",
    "diff_stats",
    "flatten_stats",
    "main",
    "markdown_table",
    "percentile",
    "render_markdown",
    "run_level",
    "summarize",
    "text_table",
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
_COUNTERS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
_REPORT_EVERY = 15.0  # seconds between progress lines within a level
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
    None until the first audio arrives / the stream completes (None at the end: cut off or failed)."""

    index: int
    measured: bool
    start: float
    first_chunk: float | None = None
    end: float | None = None
    audio_seconds: float = 0.0
    chunks: int = 0
    error: str | None = None

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

    def _per_request_ms(self, *stats: str) -> float:
        count = self.counters[f"{stats[0]}.count"]
        return sum(self.counters[f"{s}.ns"] for s in stats) / count / 1e6 if count else math.nan

    @property
    def queue_ms(self) -> float:
        """Mean time a request waited in the model's queue, ms."""
        return self._per_request_ms("queue")

    @property
    def compute_ms(self) -> float:
        """Mean compute time (input + infer + output) per request, ms; a batch's time counts for each member."""
        return self._per_request_ms("compute_input", "compute_infer", "compute_output")


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


def summarize(level: LevelResult) -> LevelSummary:
    """Reduce a level's records to the reported numbers (see :class:`LevelSummary`)."""
    measured = [r for r in level.records if r.measured]
    done = [r for r in measured if r.ok and r.audio_seconds > 0]
    first = [1000 * (r.first_chunk - r.start) for r in measured if r.first_chunk is not None]
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
        audio_per_second=sum(r.audio_seconds for r in level.records) / span if span > 0 else math.nan,
        requests_per_second=sum(r.ok for r in level.records) / span if span > 0 else math.nan,
        loaded_seconds=span,
        cpu_busy=level.cpu_busy,
        cpu_steal=level.cpu_steal,
        cpu_own=level.cpu_own,
    )


# --------------------------------------------------------------------------- rendering (pure)

LEVEL_HEADERS = ("concurrency", "measured", "done", "errors", "cut off", "first chunk p50 ms", "p90 ms", "p99 ms",
                 "RTF mean", "RTF p90", "audio s / s", "requests / s", "loaded s", "CPU busy %", "of which bench %")
MODEL_HEADERS = ("model", "requests", "failures", "executions", "avg batch", "queue ms / req", "compute ms / req")


def _num(value: float, digits: int = 0) -> str:
    return "–" if math.isnan(value) else f"{value:,.{digits}f}"


def level_row(s: LevelSummary) -> list[str]:
    """One row of the levels table (headers :data:`LEVEL_HEADERS`)."""
    return [str(s.concurrency), str(s.measured), str(s.completed), str(s.errors), str(s.cut_off),
            _num(s.first_chunk_p50), _num(s.first_chunk_p90), _num(s.first_chunk_p99), _num(s.rtf_mean, 2),
            _num(s.rtf_p90, 2), _num(s.audio_per_second, 2), _num(s.requests_per_second, 3),
            _num(s.loaded_seconds, 1), _num(s.cpu_busy), _num(s.cpu_own)]


def model_row(m: ModelDelta) -> list[str]:
    """One row of a per-model statistics table (headers :data:`MODEL_HEADERS`)."""
    return [m.name, str(m.requests), str(m.failures), str(m.executions), _num(m.avg_batch, 2), _num(m.queue_ms, 2),
            _num(m.compute_ms, 2)]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A GitHub Markdown table; the first ``left`` columns are left-aligned, the others right-aligned.
    ``|`` in cells is escaped."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---" if i < left else "---:" for i in range(len(headers))]
    return "\n".join([line(headers), "|" + "|".join(align) + "|", *(line(r) for r in rows)])


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table padded for a terminal; columns after the first are right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                             strict=True)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


@dataclass(frozen=True)
class Report:
    """What the Markdown report is made of. ``machine`` and ``server`` are (label, value) pairs;
    ``sentences`` rows are (kind, text, phoneme ids, max-steps guard audio s, median measured audio s)."""

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


def render_markdown(report: Report) -> str:
    """The whole BENCHMARKS.md text for ``report``."""
    summaries = [summarize(level) for level in report.levels]
    steal = [s.cpu_steal for s in summaries if not math.isnan(s.cpu_steal)]
    others = [s.cpu_busy - s.cpu_own for s in summaries if not math.isnan(s.cpu_own)]
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
        rows = [[name, *(str(s.get(k, "")) for k in ("max_batch_size", "max_queue_delay_us", "instances",
                                                      "intra_op_threads", "inter_op_threads"))]
                for name, s in report.settings.items()]
        parts += ["\nNetwork model settings (from `repository.json`):\n\n",
                  markdown_table(("network", "max batch", "max queue delay µs", "instances", "intra-op threads",
                                  "inter-op threads"), rows), "\n"]
    parts += [
        "\n## Method\n\n",
        f"- Warm-up: {report.warmup} request(s) one at a time (the first sentences of the set), not measured.\n",
        f"- Per concurrency C: C closed-loop workers (one `AsyncTTSClient`, one gRPC stream per request, no think "
        f"time). Requests started in the first {report.seconds:g} s (up to `--requests`) are measured; then "
        f"unmeasured filler requests keep C streams in flight until every measured one finished (at most "
        f"{report.grace:g} s more; requests still running then are cancelled and counted as *cut off*).\n",
        "- Requests cycle through the sentence set below in order, with the server's default voice and emotion.\n",
        "- First-chunk latency: request sent -> first audio chunk received, over measured requests that got audio. "
        "RTF: total stream time / audio seconds, over measured completed requests (below 1 is faster than real "
        "time). Throughput: audio seconds (and completed streams) received per wall second while the load was "
        "held (*loaded s*), fillers and partial audio included.\n",
        "- CPU busy %: all cores, from `/proc/stat`, over the loaded period; *of which bench %*: the part used by "
        "the benchmark itself (the embedded server's process group and the client process, which runs on the same "
        "machine); the rest was used by other processes.\n",
        "- Per-model statistics: Triton's `get_inference_statistics` before and after each level (after the "
        "server went idle), diffed; they include the fillers' work.\n",
        "\n### Sentence set\n\n",
        markdown_table(("kind", "text", "phoneme ids", "guard audio s", "measured audio s (median)"),
                       report.sentences, left=2),
        "\n\n## Results\n\n",
        markdown_table(LEVEL_HEADERS, [level_row(s) for s in summaries]),
        "\n\n",
    ]
    parts.append(f"![latency and throughput against concurrency]({report.plot})\n\n")
    parts.append("### Per-model Triton statistics, per level\n\n")
    for level in report.levels:
        parts += [f"Concurrency {level.concurrency}:\n\n", markdown_table(MODEL_HEADERS,
                                                                          [model_row(m) for m in level.models]),
                  "\n\n"]
    errors = sorted({r.error for level in report.levels for r in level.records if r.error})
    if errors:
        parts += ["### Errors\n\n", "".join(f"- `{e}`\n" for e in errors[:10]), "\n"]
    parts += [
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
        "of the model is about compute ms / req × requests / avg batch.\n",
    ]
    return "".join(parts)


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
    """Hold ``concurrency`` streams in flight; measure the requests started in the first ``seconds`` (at most
    ``requests``); stop when they all finished or ``seconds + grace`` passed (cancelling what still runs).
    The returned result has no model statistics or CPU usage yet."""
    t0 = _now()
    records: list[RequestRecord] = []
    counters = {"measured": 0, "next": 0}

    async def worker() -> None:
        while True:
            measured = counters["measured"] < requests and _now() - t0 < seconds
            counters["measured"] += measured
            record = RequestRecord(index=counters["next"], measured=measured, start=_now() - t0)
            counters["next"] += 1
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
            issuing = counters["measured"] < requests and elapsed < seconds
            if (not issuing and pending() == 0) or elapsed >= seconds + grace:
                break
            if elapsed >= next_report:
                done = sum(r.measured and r.end is not None for r in records)
                say(f"    c={concurrency} {elapsed:5.0f} s: {done}/{counters['measured']} measured done, "
                    f"{pending()} measured in flight{'' if issuing else ', draining'}")
                next_report += _REPORT_EVERY
    finally:
        loaded = _now() - t0
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
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


def describe_machine() -> list[tuple[str, str]]:
    """CPU model, cores, virtualisation, memory, OS and the client-side package versions."""
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
        ("Memory", f"{mem_kb / 2**20:.1f} GiB" if mem_kb else "unknown"),
        ("OS", f"{os_name}, kernel {platform.release()}"),
        ("Python", platform.python_version()),
        ("Packages", ", ".join(f"{p} {_version(p)}" for p in ("onnxruntime", "tritonclient", "nvidia-pytriton",
                                                                "numpy"))),
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
    from tts_triton.contract import TTS

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
        settings = manifest.get("settings", {}).get("networks", {})
    return ServerInfo(facts, trained, settings, params)


def sentence_rows(levels: Sequence[LevelResult], model_config: str) -> list[tuple[str, str, str, str, str]]:
    """The sentence table: kind, text, phoneme ids, audio seconds at the max-steps guard, median measured audio."""
    from tts_triton import audio
    from tts_triton.config import ModelConfig
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


def plot(summaries: Sequence[LevelSummary], path: Path, title: str) -> None:
    """Three panels against concurrency: first-chunk latency percentiles, RTF, throughput."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = [s.concurrency for s in summaries]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    ax = axes[0]
    for label, values in (("p50", [s.first_chunk_p50 for s in summaries]),
                          ("p90", [s.first_chunk_p90 for s in summaries]),
                          ("p99", [s.first_chunk_p99 for s in summaries])):
        ax.plot(cs, values, marker="o", label=label)
    ax.set_title("first-chunk latency")
    ax.set_ylabel("ms")
    ax = axes[1]
    ax.plot(cs, [s.rtf_mean for s in summaries], marker="o", label="mean")
    ax.plot(cs, [s.rtf_p90 for s in summaries], marker="o", label="p90")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="real time")
    ax.set_title("real-time factor (total time / audio s)")
    ax = axes[2]
    ax.plot(cs, [s.audio_per_second for s in summaries], marker="o", color="tab:green", label="audio s / s")
    ax.set_title("throughput")
    ax.set_ylabel("audio seconds per wall second")
    twin = ax.twinx()
    twin.plot(cs, [s.requests_per_second for s in summaries], marker="s", color="tab:purple", label="requests / s")
    twin.set_ylabel("requests / s")
    twin.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.set_xlabel("concurrent streams")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[:2]:
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tts-triton bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="gRPC address host:port of a running server (default: start the embedded server "
                                 "on free loopback ports and stop it afterwards)")
    p.add_argument("--model-repository", type=Path, default=default_model_repository(),
                   help="repository the embedded server serves, built if needed (default %(default)s)")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16], help="levels (default 1 4 16)")
    p.add_argument("--requests", type=int, help="measured requests per level at most (default 8 x concurrency)")
    p.add_argument("--seconds", type=float, default=30.0,
                   help="per level, measured requests start only during this many seconds (default %(default)s)")
    p.add_argument("--grace", type=float, default=90.0,
                   help="per level, seconds after --seconds for measured requests to finish before they are "
                        "cancelled (default %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests, one at a time (default %(default)s)")
    p.add_argument("--out", type=Path, default=Path("runs/bench/BENCHMARKS.md"), help="report (default %(default)s)")
    p.add_argument("--plot", type=Path, default=Path("runs/bench/concurrency.png"),
                   help="PNG plot (default %(default)s)")
    return p


@dataclass(frozen=True)
class Target:
    """The server under test: its gRPC address and, for the embedded server, its repository and process group."""

    url: str
    repository: Path | None = None
    process_group: int | None = None


@contextlib.contextmanager
def _server(args: argparse.Namespace, say: Callable[[str], None]) -> Iterator[Target]:
    """``--url``, or the embedded server on free loopback ports for the duration of the block."""
    if args.url:
        yield Target(args.url)
        return
    from tts_triton.build import ensure_repository
    from tts_triton.server import TritonServer, free_port

    repository = ensure_repository(args.model_repository)
    ports: list[int] = []
    while len(ports) < 3:
        port = free_port()
        if port not in ports:
            ports.append(port)
    server = TritonServer(repository.resolve(), http_port=ports[0], grpc_port=ports[1], metrics_port=ports[2])
    say(f"starting the embedded tritonserver (log: {server.log_file}) ...")
    with server:
        yield Target(server.grpc_url, repository, server.pid)


async def _bench(args: argparse.Namespace, target: Target,
                 say: Callable[[str], None]) -> tuple[list[LevelResult], ServerInfo]:
    import tritonclient.grpc.aio as grpcclient_aio

    from tts_triton.client import AsyncTTSClient, TTSError

    server = grpcclient_aio.InferenceServerClient(target.url)
    try:
        described = await describe_server(server, target.url, target.repository)
        if described.trained is not True:
            say("note: the served weights are not trained; see the report")
        async with AsyncTTSClient(target.url) as client:
            for i in range(args.warmup):
                record = RequestRecord(index=i, measured=False, start=0.0)
                await _one_stream(client, record, _now())
                if record.error:
                    raise TTSError(f"warm-up request failed: {record.error}")
                say(f"warm-up {i + 1}/{args.warmup}: {record.audio_seconds:.1f} s of audio in "
                    f"{record.end or math.nan:.1f} s")
            levels = []
            for concurrency in args.concurrency:
                before = await _wait_idle(server)
                cpu_before = CpuSample.read(target.process_group)
                requests = args.requests or 8 * concurrency
                say(f"level c={concurrency}: up to {requests} measured requests started within {args.seconds:g} s")
                level = await run_level(client, concurrency, requests, args.seconds, args.grace, say)
                cpu_after = CpuSample.read(target.process_group)
                level.cpu_busy, level.cpu_steal, level.cpu_own = CpuSample.usage(cpu_before, cpu_after)
                level.models = diff_stats(before, await _wait_idle(server))
                levels.append(level)
                s = summarize(level)
                say(f"  c={concurrency}: {s.completed}/{s.measured} done ({s.errors} errors, {s.cut_off} cut off) in "
                    f"{s.loaded_seconds:.0f} s; first chunk p50/p90/p99 {_num(s.first_chunk_p50)}/"
                    f"{_num(s.first_chunk_p90)}/{_num(s.first_chunk_p99)} ms; RTF mean {_num(s.rtf_mean, 2)}; "
                    f"{_num(s.audio_per_second, 2)} audio s/s; CPU busy {_num(s.cpu_busy)} % "
                    f"(bench {_num(s.cpu_own)} %)")
    finally:
        await server.close()
    return levels, described


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (see the module docstring); returns the exit status: 0, 1 if any request failed, 2 if
    the server could not be started or reached."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join(["tts-triton", "bench", *argv])
    args = parser().parse_args(argv[1:] if argv[:1] == ["--"] else argv)  # `tts-triton bench -- --help`
    if any(c < 1 for c in args.concurrency) or args.seconds <= 0 or args.grace < 0 or args.warmup < 0:
        parser().error("concurrency and --seconds must be positive, --grace and --warmup not negative")

    def say(message: str) -> None:
        print(message, flush=True)

    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    from tritonclient.utils import InferenceServerException

    from tts_triton.client import TTSError
    from tts_triton.server import TritonServerError

    try:
        with _server(args, say) as target:
            levels, info = asyncio.run(_bench(args, target, say))
    except (InferenceServerException, TTSError, TritonServerError) as err:
        print(f"error: benchmark of {args.url or 'the embedded server'} failed: {err}", file=sys.stderr)
        return 2
    summaries = [summarize(level) for level in levels]
    print("\n" + text_table(LEVEL_HEADERS, [level_row(s) for s in summaries]))
    for level in levels:
        print(f"\nconcurrency {level.concurrency}:\n" + text_table(MODEL_HEADERS, [model_row(m) for m in level.models]))
    checkpoint = info.parameters.get("checkpoint_name", "?")
    plot(summaries, args.plot, f"tts over gRPC, checkpoint {checkpoint}{'' if info.trained else ' (UNTRAINED)'}, "
                               f"{date}")
    plot_link = os.path.relpath(args.plot.resolve(), args.out.resolve().parent)
    report = Report(date=date, command=command, machine=describe_machine(), server=info.facts, trained=info.trained,
                    settings=info.settings, levels=levels,
                    sentences=sentence_rows(levels, info.parameters.get("model_config", "")),
                    plot=plot_link, warmup=args.warmup, seconds=args.seconds, grace=args.grace)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render_markdown(report))
    print(f"\nwrote {args.out} and {args.plot}")
    return 1 if any(s.errors for s in summaries) else 0


if __name__ == "__main__":
    raise SystemExit(main())
