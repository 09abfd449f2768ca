"""Plot a Locust run of locustfile.py: latency percentiles and throughput over time, as one PNG.

Reads ``<results>/<prefix>_stats_history.csv`` (Locust's ``--csv <results>/<prefix> --csv-full-history``)
and, when present, the exact per-request records ``<results>/requests*.csv`` written by the locustfile,
which are drawn as dots under Locust's (rounded, sliding-window) percentile lines.

    python loadtest/report.py runs/loadtest/20250101-120000            # -> .../report.png
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

from tts_triton.jobs.figures import pyplot, save_figure

PERCENTILES = ("50%", "90%", "99%")
#: (Locust request name, the record's column of the Unix time it ended, title); a record's ``start`` is when it began.
LATENCIES = (("first_chunk", "first_chunk", "time to first audio chunk"), ("stream", "end", "whole stream"))


def _number(text: str) -> float:
    return float("nan") if text in ("", "N/A") else float(text)


def read_history(path: Path) -> dict[str, dict[str, list[float]]]:
    """Locust's stats history as ``{request name: {column: values}}``; "N/A" becomes NaN."""
    series: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            columns = series[row["Name"]]
            for column, value in row.items():
                if column not in ("Type", "Name"):
                    columns[column].append(_number(value))
    return series


def read_requests(folder: Path) -> list[dict[str, str]]:
    """The locustfile's exact per-request records from every process (``requests.csv``, ``requests-<worker>.csv``)."""
    rows: list[dict[str, str]] = []
    for path in sorted(folder.glob("requests*.csv")):
        with path.open(newline="") as f:
            rows.extend(csv.DictReader(f))
    return rows


def plot(history: dict[str, dict[str, list[float]]], requests: list[dict[str, str]], title: str, out: Path) -> None:
    """Three panels over seconds since the start: first-chunk latency, stream latency, throughput and users."""
    t0 = min(min(columns["Timestamp"]) for columns in history.values())
    fig, axes = pyplot().subplots(3, 1, figsize=(11, 10), sharex=True)
    for ax, (name, field, label) in zip(axes, LATENCIES, strict=False):
        ok = [r for r in requests if not r["error"] and r[field]]
        if ok:
            ax.scatter([float(r[field]) - t0 for r in ok], [(float(r[field]) - float(r["start"])) * 1e3 for r in ok],
                       s=4, alpha=0.25, color="grey", label="each request (exact)")
        columns = history.get(name)
        if columns:
            seconds = [t - t0 for t in columns["Timestamp"]]
            for percentile in PERCENTILES:
                # Locust reports 0 for a window without requests: not a latency.
                values = [v if v > 0 else math.nan for v in columns[percentile]]
                ax.plot(seconds, values, label=f"p{percentile.rstrip('%')} (Locust, windowed)")
        ax.set_ylabel("ms")
        ax.set_title(label)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)

    ax = axes[2]
    stream = history.get("stream") or history["Aggregated"]
    seconds = [t - t0 for t in stream["Timestamp"]]
    ax.plot(seconds, stream["Requests/s"], label="streams/s")
    ax.plot(seconds, stream["Failures/s"], label="failures/s", color="tab:red")
    ax.set_ylabel("requests / s")
    ax.set_xlabel("seconds since start")
    ax.set_title("throughput")
    ax.grid(alpha=0.3)
    users_ax = ax.twinx()
    users = history["Aggregated"]
    users_ax.plot([t - t0 for t in users["Timestamp"]], users["User Count"], color="tab:green", linestyle="--",
                  label="users")
    users_ax.set_ylabel("users")
    lines = ax.get_legend_handles_labels()
    user_lines = users_ax.get_legend_handles_labels()
    ax.legend(lines[0] + user_lines[0], lines[1] + user_lines[1], loc="upper left", fontsize=8)

    fig.suptitle(title)
    save_figure(fig, out, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="folder holding the Locust CSV files")
    parser.add_argument("--prefix", default="locust", help="the --csv prefix's file name part (default: locust)")
    parser.add_argument("-o", "--output", type=Path, help="PNG to write (default: <results>/report.png)")
    args = parser.parse_args(argv)
    history_path = args.results / f"{args.prefix}_stats_history.csv"
    if not history_path.exists():
        parser.error(f"{history_path} not found (run Locust with --csv {args.results / args.prefix} "
                     "--csv-full-history)")
    out = args.output or args.results / "report.png"
    plot(read_history(history_path), read_requests(args.results), f"tts load test: {args.results.name}", out)
    print(out)


if __name__ == "__main__":
    main()
