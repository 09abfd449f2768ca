"""Two bench runs side by side: ``python -m tts_triton.bench.compare BEFORE/bench.json AFTER/bench.json``.

For runs of two trees on one machine (``scripts/gpu/ab-bench.sh``), each level the two runs share: first-chunk
latency, aggregate x real time and CPU use, with the after/before ratios; the server's CPU core-ms per second of
audio, whole and by process kind; then, per level, how many requests, rows and executions each network model
took. Prints the Markdown and, with ``--out``, writes it there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tts_triton.bench.report import read_bench_text
from tts_triton.bench.stats import CPU_GROUPS, LevelSummary, ModelDelta, server_cpu
from tts_triton.jobs.tables import markdown_table, print_report

_CPU_FIELDS = ("server_cpu_ms", "bls_cpu_ms", "networks_cpu_ms", "tritonserver_cpu_ms")  # in CPU_GROUPS' order
LEVEL_HEADERS = ("concurrency", "first chunk p50 ms", "p99 ms", "x real time", "CPU busy %", "errors")
CPU_HEADERS = ("concurrency", "server core-ms / audio s", "BLS stubs", "network stubs", "tritonserver")
MODEL_HEADERS = ("concurrency", "model", "requests", "rows", "executions", "compute ms / req")


def _summaries(bench: dict[str, Any]) -> list[LevelSummary]:
    return [LevelSummary(**{k: math.nan if v is None else v for k, v in level.items()})
            for level in bench["summaries"]["levels"]]


def _levels(bench: dict[str, Any], shares: bool) -> dict[int, tuple[LevelSummary, list[ModelDelta]]]:
    """Concurrency -> (summary, model statistics) of a bench.json's served levels; with ``shares``, the server's CPU
    per audio second from :func:`cpu_from_shares` (as a bench before it was reported must have it)."""
    raw = bench["report"]["levels"]
    summaries = [dataclasses.replace(s, **cpu_from_shares(level)) if shares else s
                 for s, level in zip(_summaries(bench), raw, strict=True)]
    models = [[ModelDelta(m["name"], m["counters"]) for m in level["models"]] for level in raw]
    return {s.concurrency: (s, m) for s, m in zip(summaries, models, strict=True)}


def cpu_from_shares(level: dict[str, Any]) -> dict[str, float]:
    """The server's CPU per audio second (LevelSummary's ``*_cpu_ms`` fields) of a bench.json level that has only
    its processes' shares of one core (``cpu_processes``): each share over the level's span, from its first request
    to its last response (the span the shares were taken over, to within the level's set-up); NaN without them."""
    records = level.get("records", [])
    received = sum(r["audio_seconds"] for r in records)
    span = max((r["end"] or r["first_chunk"] or r["start"] for r in records), default=0.0)
    seconds = {kind: share / 100.0 * span for kind, (_, share) in level.get("cpu_processes", {}).items()}
    cpu = server_cpu(seconds) if received > 0 and span > 0 else {}
    return {field: 1000.0 * cpu[group] / received if cpu else math.nan
            for field, group in zip(_CPU_FIELDS, CPU_GROUPS, strict=True)}


def _pair(before: float, after: float, digits: int = 1) -> str:
    """``before → after (ratio)``; "–" for an unknown number."""
    if math.isnan(before) and math.isnan(after):
        return "–"
    ratio = after / before if before and not math.isnan(before) else math.nan
    return " → ".join("–" if math.isnan(v) else f"{v:,.{digits}f}" for v in (before, after)) + (
        "" if math.isnan(ratio) else f" ({ratio:.2f}x)")


def _counts(old: ModelDelta | None, new: ModelDelta | None, key: str, fmt: str = "{}") -> str:
    """``old → new`` of one model's ``key``; "–" for a side that did not have the model."""
    return " → ".join("–" if m is None else fmt.format(getattr(m, key)) for m in (old, new))


def compare(before: dict[str, Any], after: dict[str, Any], labels: Sequence[str] = ("before", "after")) -> str:
    """The Markdown comparison of two bench.json documents (levels both ran, in order of concurrency)."""
    # both sides the same way: from the processes' shares where either bench did not report the figure itself
    shares = any(math.isnan(s.server_cpu_ms) for bench in (before, after) for s in _summaries(bench))
    old, new = _levels(before, shares), _levels(after, shares)
    shared = sorted(set(old) & set(new))
    rows = []
    for c in shared:
        a, b = old[c][0], new[c][0]
        rows.append([str(c), _pair(a.first_chunk_p50, b.first_chunk_p50), _pair(a.first_chunk_p99, b.first_chunk_p99),
                     _pair(a.audio_per_second, b.audio_per_second), _pair(a.cpu_busy, b.cpu_busy, 0),
                     f"{a.errors} → {b.errors}"])
    cpu_rows = [[str(c), *(_pair(getattr(old[c][0], key), getattr(new[c][0], key), 2)
                           for key in _CPU_FIELDS)]
                for c in shared]
    model_rows = []
    for c in shared:
        olds, news = ({m.name: m for m in models} for models in (old[c][1], new[c][1]))
        for name in [*news, *(n for n in olds if n not in news)]:  # a model one side lacks reads "–" there
            m_old, m_new = olds.get(name), news.get(name)
            if any(m is not None and m.requests for m in (m_old, m_new)):
                model_rows.append([str(c), name, *(_counts(m_old, m_new, key) for key in ("requests", "rows",
                                                                                      "executions")),
                                   _counts(m_old, m_new, "compute_ms", "{:.2f}")])
    first, second = labels
    return "\n".join([
        f"Each cell: {first} → {second} ({second} / {first}).", "",
        markdown_table(LEVEL_HEADERS, rows), "",
        "The server's CPU per second of audio (core-ms of its processes over the level per audio second received; "
        "the load generator's excluded" + ("; from each process kind's share of a core over the level's span, as a "
                                           "bench.json here lacks the figure" if shares else "") + "):", "",
        markdown_table(CPU_HEADERS, cpu_rows), "",
        "Per network model (Triton's statistics over each level, fillers included):", "",
        markdown_table(MODEL_HEADERS, model_rows, left=2), "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts_triton.bench.compare", description=__doc__.split("\n")[0])
    p.add_argument("before", type=Path, help="bench.json (or bench.json.gz) of the earlier tree")
    p.add_argument("after", type=Path, help="bench.json (or bench.json.gz) of the later tree")
    p.add_argument("--labels", nargs=2, default=("before", "after"), metavar=("BEFORE", "AFTER"))
    p.add_argument("--out", type=Path, help="also write the Markdown here")
    args = p.parse_args(argv)
    text = compare(*(json.loads(read_bench_text(path)) for path in (args.before, args.after)), args.labels)
    print_report(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
