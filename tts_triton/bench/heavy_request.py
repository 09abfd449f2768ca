"""A heavy request beside a steady stream: how long the stream's chunks wait while the heavy request arrives.

    python -m tts_triton.bench.heavy_request --out runs/heavy-request [--heavy text|reference] [--trials 6]
        [--url HOST:PORT]

Starts an embedded server of the default repository (or uses the one at ``--url``). Each trial streams
:data:`STEADY` from ``tts`` over gRPC; every other trial, once its audio flows, sends a heavy request to ``tts`` as
well, stopped in-band at its first chunk:

- ``text``: the synthetic corpus's sentences up to just under the request limit (``RequestLimits.max_text_chars``);
- ``reference``: a sentence with reference audio of the longest length accepted
  (``RequestLimits.max_reference_seconds``) at 48 kHz, new in each trial (the server caches a reference's style).

The trials without it measure the stream's own gaps between chunks; work that the heavy request does on the event
loop the streams share adds to one of them.

Prints a table (the steady stream's largest and median gap between chunks with and without the heavy request, the
heavy request's first chunk) and writes ``heavy-request.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.client import TTSClient
from tts_triton.core.config import LIMITS
from tts_triton.data.sentences import generate

__all__ = ["HEAVY", "STEADY", "long_text", "main"]

STEADY = " ".join(["A steady stream of words goes on while a long text arrives."] * 8)
#: Seconds of the steady stream's audio flow before the heavy request is sent.
SEND_AFTER_S = 0.8
#: The rate of the heavy reference audio: a common recording rate, which the server resamples.
REFERENCE_RATE = 48_000
HEAVY = ("text", "reference")


def long_text(limit: int = LIMITS.max_text_chars) -> str:
    """The synthetic corpus's sentences, joined, up to just under ``limit`` characters (varied words, so that the
    front end's caches of words it has read help no more than they would with a real text)."""
    text = ""
    for sentence in generate():
        if len(text) + len(sentence.text) + 1 >= limit:
            return text
        text = f"{text} {sentence.text}" if text else sentence.text
    return text


def heavy_request(kind: str, seed: int) -> tuple[str, dict[str, Any]]:
    """The text and request options of a heavy request of ``kind`` (one of :data:`HEAVY`); ``seed`` makes a
    reference new."""
    if kind == "text":
        return long_text(), {}
    samples = int(LIMITS.max_reference_seconds * REFERENCE_RATE)
    noise = np.random.default_rng(seed).standard_normal(samples).astype(np.float32)
    return "A voice to copy.", {"reference_audio": 0.1 * noise, "reference_sample_rate": REFERENCE_RATE}


def trial(client: TTSClient, heavy: tuple[str, dict[str, Any]] | None) -> tuple[list[float], float | None]:
    """The steady stream's gaps between chunks (s, from its first chunk on) and the heavy request's first chunk (s)."""
    arrivals: list[float] = []

    def steady() -> None:
        arrivals.extend(time.perf_counter() for _ in client.stream(STEADY))

    thread = threading.Thread(target=steady)
    thread.start()
    first = None
    if heavy is not None:
        time.sleep(SEND_AFTER_S)
        start = time.perf_counter()
        text, options = heavy
        with contextlib.closing(client.stream(text, **options)) as chunks:  # closed at the first chunk: in-band stop
            next(chunks)
            first = time.perf_counter() - start
    thread.join()
    return [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)], first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.bench.heavy_request", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/heavy-request"), help="folder for the report")
    parser.add_argument("--heavy", choices=HEAVY, default="text", help="the heavy request (default: text)")
    parser.add_argument("--trials", type=int, default=6,
                        help="trials, half of them with the heavy request (default 6)")
    parser.add_argument("--url", help="the gRPC address of a running server (default: start one)")
    args = parser.parse_args(argv)
    if args.trials < 2:
        parser.error("--trials must be at least 2")

    from tts_triton.core.paths import default_model_repository
    from tts_triton.export.build import ensure_repository
    from tts_triton.jobs.tables import text_table
    from tts_triton.ops.embedded import embedded_server

    results: dict[bool, list[tuple[list[float], float | None]]] = {False: [], True: []}
    with contextlib.ExitStack() as stack:
        url = args.url
        if url is None:
            server = stack.enter_context(embedded_server(ensure_repository(default_model_repository())))
            url = server.grpc_url
        client = stack.enter_context(contextlib.closing(TTSClient(url)))
        list(client.stream("Warm up. Warm up again."))
        for i in range(args.trials):
            beside = i % 2 == 1
            results[beside].append(trial(client, heavy_request(args.heavy, i) if beside else None))
            print(f"trial {i + 1}/{args.trials} done", file=sys.stderr, flush=True)

    def row(beside: bool) -> list[str]:
        runs = results[beside]
        largest = [max(gaps) * 1000 for gaps, _ in runs]
        medians = [statistics.median(gaps) * 1000 for gaps, _ in runs]
        firsts = [first * 1000 for _, first in runs if first is not None]
        return [f"beside the heavy {args.heavy}" if beside else "alone", str(len(runs)),
                f"{statistics.median(largest):.0f}", f"{max(largest):.0f}", f"{statistics.median(medians):.0f}",
                f"{statistics.median(firsts):.0f}" if firsts else "-"]

    headers = ["steady stream", "trials", "largest gap ms (median)", "largest gap ms (max)", "median gap ms",
               "heavy request first chunk ms"]
    rows = [row(False), row(True)]
    print(text_table(headers, rows))
    command = " ".join(["python -m tts_triton.bench.heavy_request", *(argv if argv is not None else sys.argv[1:])])
    text, options = heavy_request(args.heavy, 0)
    heavy = (f"{len(text):,} characters" if args.heavy == "text" else
             f"{len(options['reference_audio']) / REFERENCE_RATE:.0f} s of reference audio at {REFERENCE_RATE} Hz")
    lines = [f"# A heavy request beside a steady stream ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"`{command}`; heavy request: {heavy}; steady text: {len(STEADY)} characters.", "",
             "| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1),
             *("| " + " | ".join(r) + " |" for r in rows), ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "heavy-request.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
