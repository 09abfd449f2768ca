"""A long text beside a steady stream: how long the stream's chunks wait while the long text arrives.

    python -m tts_triton.bench.long_text --out runs/long-text [--trials 6] [--url HOST:PORT]

Starts an embedded server of the default repository (or uses the one at ``--url``). Each trial streams
:data:`STEADY` from ``tts`` over gRPC; every other trial, once its audio flows, sends a long text to ``tts`` as
well: the synthetic corpus's sentences up to just under the request limit (``RequestLimits.max_text_chars``). That
request is stopped in-band at its first chunk. The trials without it measure the stream's own gaps between chunks;
a long text planned on the event loop that the streams share adds its planning time to one of them.

Prints a table (the steady stream's largest and median gap between chunks with and without the long text, the long
text's first chunk) and writes ``long-text.md`` into ``--out``.
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

from tts_triton.client import TTSClient
from tts_triton.core.config import LIMITS
from tts_triton.data.sentences import generate

__all__ = ["STEADY", "long_text", "main"]

STEADY = " ".join(["A steady stream of words goes on while a long text arrives."] * 8)
#: Seconds of the steady stream's audio flow before the long text is sent.
SEND_AFTER_S = 0.8


def long_text(limit: int = LIMITS.max_text_chars) -> str:
    """The synthetic corpus's sentences, joined, up to just under ``limit`` characters (varied words, so that the
    front end's caches of words it has read help no more than they would with a real text)."""
    text = ""
    for sentence in generate():
        if len(text) + len(sentence.text) + 1 >= limit:
            return text
        text = f"{text} {sentence.text}" if text else sentence.text
    return text


def trial(client: TTSClient, long: str | None) -> tuple[list[float], float | None]:
    """The steady stream's gaps between chunks (s, from its first chunk on) and the long text's first chunk (s)."""
    arrivals: list[float] = []

    def steady() -> None:
        arrivals.extend(time.perf_counter() for _ in client.stream(STEADY))

    thread = threading.Thread(target=steady)
    thread.start()
    first = None
    if long is not None:
        time.sleep(SEND_AFTER_S)
        start = time.perf_counter()
        with contextlib.closing(client.stream(long)) as chunks:  # closed at the first chunk: an in-band stop
            next(chunks)
            first = time.perf_counter() - start
    thread.join()
    return [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)], first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.bench.long_text", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/long-text"), help="folder for the report")
    parser.add_argument("--trials", type=int, default=6, help="trials, half of them with the long text (default 6)")
    parser.add_argument("--url", help="the gRPC address of a running server (default: start one)")
    args = parser.parse_args(argv)
    if args.trials < 2:
        parser.error("--trials must be at least 2")

    from tts_triton.core.paths import default_model_repository
    from tts_triton.export.build import ensure_repository
    from tts_triton.jobs.tables import text_table
    from tts_triton.ops.embedded import embedded_server

    long = long_text()
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
            results[beside].append(trial(client, long if beside else None))
            print(f"trial {i + 1}/{args.trials} done", file=sys.stderr, flush=True)

    def row(beside: bool) -> list[str]:
        runs = results[beside]
        largest = [max(gaps) * 1000 for gaps, _ in runs]
        medians = [statistics.median(gaps) * 1000 for gaps, _ in runs]
        firsts = [first * 1000 for _, first in runs if first is not None]
        return ["beside the long text" if beside else "alone", str(len(runs)), f"{statistics.median(largest):.0f}",
                f"{max(largest):.0f}", f"{statistics.median(medians):.0f}",
                f"{statistics.median(firsts):.0f}" if firsts else "-"]

    headers = ["steady stream", "trials", "largest gap ms (median)", "largest gap ms (max)", "median gap ms",
               "long text first chunk ms"]
    rows = [row(False), row(True)]
    print(text_table(headers, rows))
    command = " ".join(["python -m tts_triton.bench.long_text", *(argv if argv is not None else sys.argv[1:])])
    lines = [f"# A long text beside a steady stream ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"`{command}`; long text: {len(long):,} characters; steady text: {len(STEADY)} characters.", "",
             "| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1),
             *("| " + " | ".join(r) + " |" for r in rows), ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "long-text.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
