"""The bench's numbers: levels of request records, their summaries, Triton's per-model statistics, CPU and
GPU memory samples (pure functions and dataclasses)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tts_triton.bench.workload import RequestRecord
from tts_triton.core import contract

__all__ = [
    "BEST_P99_MS",
    "CPU_GROUPS",
    "MODELS",
    "CpuSample",
    "LevelResult",
    "LevelSummary",
    "MemorySample",
    "MemoryTrend",
    "ModelDelta",
    "baseline_pairs",
    "best_level",
    "counter_delta",
    "diff_stats",
    "flatten_stats",
    "percentile",
    "ratio",
    "server_cpu",
    "summarize",
]

#: Models whose statistics are diffed, in pipeline order.
MODELS = (contract.TTS, contract.FIRST_DECODE, contract.ENCODE, contract.TEXT_ENCODER, contract.STYLE_ENCODER,
          contract.DECODER, contract.VOCODER)
COMPUTE_PARTS = ("compute_input", "compute_infer", "compute_output")
_COUNTERS = ("success", "fail", "queue", *COMPUTE_PARTS)


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


def ratio(a: float, b: float) -> float:
    """``a / b``; NaN when either is unknown or ``b`` is not positive."""
    return a / b if b > 0 and not (math.isnan(a) or math.isnan(b)) else math.nan


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU time in clock ticks: the machine's (``cpu`` line of ``/proc/stat``: all, idle + iowait,
    steal) and the benchmark's own (this process, its children, such as the client processes, and the server's
    process group, when known)."""

    total: int
    idle: int
    steal: int
    own: int
    #: The benchmark's own ticks by process kind (:func:`process_kind`): kind -> {pid: ticks}.
    processes: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def read(cls, server_group: int | None = None) -> CpuSample | None:
        """The current counters, or None where ``/proc`` is unavailable."""
        try:
            fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        own, me = 0, os.getpid()
        processes: dict[str, dict[int, int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # fields after "pid (comm)": state ppid pgrp ... utime(11) stime(12)
                rest = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # the process exited meanwhile
            pid, parent, group = int(stat.parent.name), int(rest[1]), int(rest[2])
            if me in (pid, parent) or (server_group is not None and group == server_group):
                ticks = int(rest[11]) + int(rest[12])
                own += ticks
                served = server_group is not None and group == server_group  # the server is a child of the bench
                kind = process_kind(stat.parent / "cmdline") if served else "bench client"
                processes.setdefault(kind, {})[pid] = ticks
        steal = fields[7] if len(fields) > 7 else 0
        return cls(total=sum(fields[:8]), idle=fields[3] + fields[4], steal=steal, own=own, processes=processes)

    @staticmethod
    def by_process(before: CpuSample | None, after: CpuSample | None,
                   cpus: int | None = None) -> dict[str, tuple[int, float]]:
        """Process kind -> (processes, their CPU time in % of one core) between two samples, busiest first (a process
        that started in between counts from 0); empty when unknown."""
        if before is None or after is None or after.total <= before.total:
            return {}
        core = (after.total - before.total) / (cpus or os.cpu_count() or 1)
        used = {kind: (len(pids), 100.0 * sum(t - before.processes.get(kind, {}).get(pid, 0)
                                               for pid, t in pids.items()) / core)
                for kind, pids in after.processes.items()}
        return dict(sorted(used.items(), key=lambda item: -item[1][1]))

    @staticmethod
    def seconds_by_kind(before: CpuSample | None, after: CpuSample | None) -> dict[str, float]:
        """Process kind -> CPU core-seconds its processes used between two samples (a process that started in
        between counts from 0); empty when unknown."""
        if before is None or after is None:
            return {}
        tick = os.sysconf("SC_CLK_TCK")
        return {kind: sum(t - before.processes.get(kind, {}).get(pid, 0) for pid, t in pids.items()) / tick
                for kind, pids in after.processes.items()}

    @staticmethod
    def usage(before: CpuSample | None, after: CpuSample | None) -> tuple[float, float, float]:
        """(busy %, steal %, the benchmark's own %) of all cores between two samples; NaN when unknown."""
        if before is None or after is None or after.total <= before.total:
            return math.nan, math.nan, math.nan
        span = after.total - before.total
        return (100.0 * (1 - (after.idle - before.idle) / span), 100.0 * (after.steal - before.steal) / span,
                100.0 * (after.own - before.own) / span)


def process_kind(cmdline: Path) -> str:
    """What a server process is, from its ``/proc/PID/cmdline``: a Python backend stub by its model's name
    (``stub tts``), else its program's name (``tritonserver``)."""
    try:
        argv = cmdline.read_bytes().split(b"\0")
    except OSError:
        return "?"
    program = os.path.basename(argv[0].decode(errors="replace"))
    if program == "triton_python_backend_stub" and len(argv) > 1:
        parts = Path(argv[1].decode(errors="replace")).parts  # .../<model>/<version>/model.py
        return f"stub {parts[-3]}" if len(parts) >= 3 else program
    return program or "?"


#: The server's process groups whose CPU per audio second the report shows (:func:`server_cpu`), the whole first.
CPU_GROUPS = ("server", "BLS", "networks", "tritonserver")
_BLS_KINDS = {f"stub {contract.TTS}", f"stub {contract.TTS_OFFLINE}"}
_CLIENT_KIND = "bench client"


def server_cpu(seconds_by_kind: Mapping[str, float]) -> dict[str, float]:
    """Core-seconds by :data:`CPU_GROUPS` from core-seconds by process kind (:meth:`CpuSample.seconds_by_kind`): the
    BLS stubs (``tts``, ``tts_offline``), the network models' stubs, tritonserver, and the server, which is every kind
    but the load generator's (``bench client``: the client processes and the bench itself) — those three and any
    other process of the server's group (an MPS daemon). Empty when no server process was seen (a server the bench
    did not start)."""
    if not set(seconds_by_kind) - {_CLIENT_KIND}:
        return {}
    groups = dict.fromkeys(CPU_GROUPS, 0.0)
    for kind, seconds in seconds_by_kind.items():
        if kind == _CLIENT_KIND:
            continue
        groups["server"] += seconds
        if kind in _BLS_KINDS:
            groups["BLS"] += seconds
        elif kind.startswith("stub "):
            groups["networks"] += seconds
        elif kind == "tritonserver":
            groups["tritonserver"] += seconds
    return groups


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
    def rows(self) -> int:
        """Batch rows inferred (Triton's inference count)."""
        return self.counters["inference_count"]

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
        """Rows per execution (the dynamic batcher's average batch size); NaN without executions."""
        return self.rows / self.executions if self.executions else math.nan

    def per_request_ms(self, *stats: str) -> float:
        """The summed time of ``stats`` (counter names) per request of the first, ms; NaN without requests."""
        count = self.counters[f"{stats[0]}.count"]
        return sum(self.counters[f"{s}.ns"] for s in stats) / count / 1e6 if count else math.nan

    @property
    def queue_ms(self) -> float:
        """Mean time a request waited in the model's queue, ms."""
        return self.per_request_ms("queue")

    @property
    def compute_ms(self) -> float:
        """Mean compute time (input + infer + output) per request, ms; a batch's time counts for each member."""
        return self.per_request_ms(*COMPUTE_PARTS)


def diff_stats(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
               models: Sequence[str] = MODELS) -> list[ModelDelta]:
    """Per-model differences ``after - before`` for ``models`` present in ``after``, in that order."""
    return [
        ModelDelta(name, {key: value - before.get(name, {}).get(key, 0) for key, value in after[name].items()})
        for name in models if name in after
    ]


@dataclass
class LevelResult:
    """Everything recorded at one concurrency: every stream, the loaded wall time, CPU and model statistics, the
    repeat ratio the texts were drawn with (None: the plain cycle) and the server's utterance-cache lookups during
    the level by outcome (empty: the server counts none)."""

    concurrency: int
    records: list[RequestRecord]
    loaded_seconds: float
    cpu_busy: float = math.nan
    cpu_steal: float = math.nan
    cpu_own: float = math.nan
    models: list[ModelDelta] = field(default_factory=list)
    repeat_ratio: float | None = None
    cache: dict[str, int] = field(default_factory=dict)
    #: Client processes that ran the level's streams (:mod:`tts_triton.bench.clients`).
    clients: int = 1
    #: The benchmark's processes by kind over the level: kind -> (processes, % of one core), see CpuSample.by_process.
    cpu_processes: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: The same processes' CPU core-seconds over the level by kind (:meth:`CpuSample.seconds_by_kind`).
    cpu_seconds: dict[str, float] = field(default_factory=dict)


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
    #: Share of measured requests that repeated an earlier text, % (NaN: no repeat ratio).
    repeat_pct: float = math.nan
    #: Utterance-cache hits among the server's cache lookups during the level, % (NaN: none counted).
    cache_hit_pct: float = math.nan
    #: The server's CPU per second of audio over the level: core-ms of its processes (:func:`server_cpu`: all of
    #: them, the BLS stubs, the network models' stubs, tritonserver; the load generator's excluded) per second of
    #: audio the streams received in the same span, fillers' included (NaN: not known, e.g. a remote server).
    server_cpu_ms: float = math.nan
    bls_cpu_ms: float = math.nan
    networks_cpu_ms: float = math.nan
    tritonserver_cpu_ms: float = math.nan


def summarize(level: LevelResult) -> LevelSummary:
    """Reduce a level's records to the reported numbers (see :class:`LevelSummary`)."""
    measured = [r for r in level.records if r.measured]
    done = [r for r in measured if r.ok and r.audio_seconds > 0]
    first = [1000 * (r.first_chunk - r.start) for r in measured if r.first_chunk is not None]
    opening = [1000 * (r.first_chunk - r.start) for r in level.records if r.opening and r.first_chunk is not None]
    rtf = [(r.end - r.start) / r.audio_seconds for r in done if r.end is not None]
    span = level.loaded_seconds
    lookups = sum(level.cache.values())
    received = sum(r.audio_seconds for r in level.records)
    cpu = server_cpu(level.cpu_seconds) if received > 0 else {}
    per_audio = {group: 1000.0 * cpu.get(group, math.nan) / received if cpu else math.nan for group in CPU_GROUPS}
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
        repeat_pct=(100.0 * sum(r.repeat for r in measured) / len(measured)
                    if level.repeat_ratio is not None and measured else math.nan),
        cache_hit_pct=100.0 * level.cache.get("hit", 0) / lookups if lookups else math.nan,
        server_cpu_ms=per_audio["server"],
        bls_cpu_ms=per_audio["BLS"],
        networks_cpu_ms=per_audio["networks"],
        tritonserver_cpu_ms=per_audio["tritonserver"],
    )


#: The first-chunk p99 (ms) of the best level (:func:`best_level`) unless a goal says: a quarter second, beyond which a
#: first chunk is a noticeable pause. The soak runs at that level; the report sets it against the ceiling.
BEST_P99_MS = 250.0


def best_level(summaries: Sequence[LevelSummary], p99_ms: float) -> LevelSummary | None:
    """The level with the highest throughput among those whose first-chunk p99 is at most ``p99_ms``; None if none."""
    fit = [s for s in summaries if s.first_chunk_p99 <= p99_ms and not math.isnan(s.audio_per_second)]
    return max(fit, key=lambda s: s.audio_per_second, default=None)


def baseline_pairs(served: Sequence[LevelSummary],
                   baseline: Sequence[LevelSummary]) -> list[tuple[LevelSummary, LevelSummary]]:
    """(served, baseline) summaries at each concurrency both measured, in the baseline's order (the first served
    level of a concurrency when several repeat ratios ran it)."""
    by_c: dict[int, LevelSummary] = {}
    for s in served:
        by_c.setdefault(s.concurrency, s)
    return [(by_c[b.concurrency], b) for b in baseline if b.concurrency in by_c]


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


def counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, int]:
    """``after - before`` per key of ``after`` (a key missing before counts from 0)."""
    return {key: int(value - before.get(key, 0)) for key, value in after.items()}
