"""Where the BLS's time to a first chunk goes, from inside it: reads the timelines that ``bls_timeline.patch``
makes the ``tts`` model write (``/tmp/bls-timeline-<pid>.jsonl``: per stream, when ``stream`` started, each BLS
call's began / sent / back / done, when the first chunk came out of the decode loop and when its response was
sent), skips the first ``--skip`` streams, and prints the median of each step of the first chunk's path.

    python3 scripts/gpu/probe/bls_timeline.py [--skip N]
"""

import argparse
import glob
import json
import statistics
from collections import defaultdict
from pathlib import Path

NETWORKS = ("text_encoder", "decoder", "vocoder")


def steps(record: dict) -> list[tuple[str, int]]:
    """(step, ns) along one stream's first chunk: its first call of each network in turn."""
    calls = {n: min((c for c in record["calls"] if c[0] == n), key=lambda c: c[1]) for n in NETWORKS}
    out, previous, label = [], record["started"], "request checks, G2P, decode loop set up"
    for name in NETWORKS:
        _, began, sent, back, done = calls[name]
        out += [(f"{label} -> {name} call", began - previous), (f"{name}: build the request", sent - began),
                (f"{name}: round trip (async_exec)", back - sent), (f"{name}: read the outputs", done - back)]
        previous, label = done, "decode loop"
    return [*out, ("vocoder output -> chunk out of the loop", record["chunk"] - previous),
            ("response built and sent", record["sent"] - record["chunk"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip", type=int, default=24, help="warm-up streams to leave out")
    args = parser.parse_args()
    records = sorted((json.loads(line) for path in glob.glob("/tmp/bls-timeline-*.jsonl")
                      for line in Path(path).read_text().splitlines()), key=lambda r: r["started"])[args.skip:]
    rows: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for step, ns in steps(record):
            rows[step].append(ns / 1e6)
        rows["total: stream start -> first response sent"].append((record["sent"] - record["started"]) / 1e6)
    print(f"{len(records)} streams (after {args.skip}); medians in ms")
    print("| step | median ms |\n|---|---:|")
    for step, values in rows.items():
        print(f"| {step} | {statistics.median(values):.3f} |")


if __name__ == "__main__":
    main()
