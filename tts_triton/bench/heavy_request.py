"""A heavy request beside a steady load: how long the load waits for its next audio while the heavy request arrives.

    python -m tts_triton.bench.heavy_request --out runs/heavy-request [--heavy text|reference|offline]
        [--trials 6] [--url HOST:PORT]

Starts an embedded server of the default repository (or uses the one at ``--url``). In each trial a steady load
runs; in every other trial a heavy request goes to the same model beside it:

- ``text``: the load is one stream of :data:`STEADY` from ``tts``; once its audio flows, the heavy request is the
  synthetic corpus's sentences up to just under the request limit (``RequestLimits.max_text_chars``), stopped
  in-band at its first chunk;
- ``reference``: the same, with one sentence and reference audio of the longest length accepted
  (``RequestLimits.max_reference_seconds``) at 48 kHz, new in each trial (the server caches a reference's style);
- ``offline``: the load is short ``tts_offline`` requests one after another (for :data:`OFFLINE_ALONE_S` without
  the heavy request); the heavy request is a ``tts_offline`` text of ``--offline-chars`` characters (default
  :data:`OFFLINE_TEXT_CHARS`), answered whole.

The figure is the time between two arrivals of the load's audio (a stream's chunks, or the short requests'
answers). The trials without the heavy request measure the load's own; work the heavy request does on the event
loop they share adds to one of them.

Prints a table (the load's largest and median time between arrivals with and without the heavy request, the heavy
request's first audio) and writes ``heavy-request.md`` into ``--out``.
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
from tts_triton.core.contract import TTS, TTS_OFFLINE
from tts_triton.data.sentences import generate

__all__ = ["HEAVY", "STEADY", "long_text", "main"]

STEADY = " ".join(["A steady stream of words goes on while a long text arrives."] * 8)
#: Seconds of the steady stream's audio flow before the heavy request is sent.
SEND_AFTER_S = 0.8
#: The rate of the heavy reference audio: a common recording rate, which the server resamples.
REFERENCE_RATE = 48_000
#: Characters of the heavy ``tts_offline`` text: about 3 minutes of audio (15 MB) answered at once (its synthesis
#: time on a CPU: docs/records/bench/heavy-request-cpu.md).
OFFLINE_TEXT_CHARS = 3_000
#: The short ``tts_offline`` requests of the offline load.
SHORT = "Hello there."
#: Seconds of the offline load in a trial without the heavy request.
OFFLINE_ALONE_S = 5.0
HEAVY = ("text", "reference", "offline")


def long_text(limit: int = LIMITS.max_text_chars) -> str:
    """The synthetic corpus's sentences, joined, up to just under ``limit`` characters (varied words, so that the
    front end's caches of words it has read help no more than they would with a real text)."""
    text = ""
    for sentence in generate():
        if len(text) + len(sentence.text) + 1 >= limit:
            return text
        text = f"{text} {sentence.text}" if text else sentence.text
    return text


def heavy_request(kind: str, seed: int, offline_chars: int = OFFLINE_TEXT_CHARS) -> tuple[str, dict[str, Any]]:
    """The text and request options of a heavy request of ``kind`` (one of :data:`HEAVY`); ``seed`` makes a
    reference new."""
    if kind != "reference":
        return long_text(offline_chars if kind == "offline" else LIMITS.max_text_chars), {}
    samples = int(LIMITS.max_reference_seconds * REFERENCE_RATE)
    noise = np.random.default_rng(seed).standard_normal(samples).astype(np.float32)
    return "A voice to copy.", {"reference_audio": 0.1 * noise, "reference_sample_rate": REFERENCE_RATE}


def trial(url: str, kind: str, heavy: tuple[str, dict[str, Any]] | None) -> tuple[list[float], float | None]:
    """The steady load's times between arrivals of audio (s) and the heavy request's first audio (s) in one trial of
    ``kind``, beside ``heavy`` unless it is None."""
    model = TTS_OFFLINE if kind == "offline" else TTS
    arrivals: list[float] = []
    load_done = threading.Event()  # for the offline load: its short requests stop

    def steady() -> None:
        with contextlib.closing(TTSClient(url, model=model)) as client:
            if model == TTS:
                arrivals.extend(time.perf_counter() for _ in client.stream(STEADY))
            while model == TTS_OFFLINE and not load_done.is_set():
                client.synthesize(SHORT)
                arrivals.append(time.perf_counter())

    thread = threading.Thread(target=steady)
    thread.start()
    first = None
    if heavy is not None:
        time.sleep(SEND_AFTER_S)
        text, options = heavy
        with contextlib.closing(TTSClient(url, model=model)) as client:
            start = time.perf_counter()
            with contextlib.closing(client.stream(text, **options)) as chunks:  # closed at the first: in-band stop
                next(chunks)
                first = time.perf_counter() - start
    elif model == TTS_OFFLINE:
        time.sleep(OFFLINE_ALONE_S)
    load_done.set()
    thread.join()
    return [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)], first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.bench.heavy_request", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/heavy-request"), help="folder for the report")
    parser.add_argument("--heavy", choices=HEAVY, default="text", help="the heavy request (default: text)")
    parser.add_argument("--trials", type=int, default=6,
                        help="trials, half of them with the heavy request (default 6)")
    parser.add_argument("--offline-chars", type=int, default=OFFLINE_TEXT_CHARS,
                        help=f"characters of the heavy tts_offline text (default {OFFLINE_TEXT_CHARS})")
    parser.add_argument("--url", help="the gRPC address of a running server (default: start one)")
    args = parser.parse_args(argv)
    if args.trials < 2:
        parser.error("--trials must be at least 2")

    from tts_triton.core.paths import default_model_repository
    from tts_triton.export.build import ensure_repository
    from tts_triton.jobs.tables import text_table
    from tts_triton.processes.embedded import embedded_server

    results: dict[bool, list[tuple[list[float], float | None]]] = {False: [], True: []}
    with contextlib.ExitStack() as stack:
        url = args.url
        if url is None:
            server = stack.enter_context(embedded_server(ensure_repository(default_model_repository())))
            url = server.grpc_url
        for model in (TTS, TTS_OFFLINE):
            with contextlib.closing(TTSClient(url, model=model)) as client:
                client.synthesize("Warm up. Warm up again.")
        for i in range(args.trials):
            beside = i % 2 == 1
            heavy = heavy_request(args.heavy, i, args.offline_chars) if beside else None
            results[beside].append(trial(url, args.heavy, heavy))
            print(f"trial {i + 1}/{args.trials} done", file=sys.stderr, flush=True)

    def row(beside: bool) -> list[str]:
        runs = results[beside]
        largest = [max(gaps) * 1000 for gaps, _ in runs]
        medians = [statistics.median(gaps) * 1000 for gaps, _ in runs]
        firsts = [first * 1000 for _, first in runs if first is not None]
        return [f"beside the heavy {args.heavy}" if beside else "alone", str(len(runs)),
                f"{statistics.median(largest):.0f}", f"{max(largest):.0f}", f"{statistics.median(medians):.0f}",
                f"{statistics.median(firsts):.0f}" if firsts else "-"]

    headers = ["steady load", "trials", "largest time between arrivals ms (median)", "the same, max ms",
               "median time between arrivals ms", "heavy request's first audio ms"]
    rows = [row(False), row(True)]
    print(text_table(headers, rows))
    command = " ".join(["python -m tts_triton.bench.heavy_request", *(argv if argv is not None else sys.argv[1:])])
    text, options = heavy_request(args.heavy, 0, args.offline_chars)
    heavy = (f"{len(options['reference_audio']) / REFERENCE_RATE:.0f} s of reference audio at {REFERENCE_RATE} Hz"
             if options else f"{len(text):,} characters to {TTS_OFFLINE if args.heavy == 'offline' else TTS}")
    load = f"{SHORT!r} to {TTS_OFFLINE}, one after another" if args.heavy == "offline" else \
        f"a stream of {len(STEADY)} characters"
    lines = [f"# A heavy request beside a steady load ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"`{command}`; heavy request: {heavy}; steady load: {load}.", "",
             "| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1),
             *("| " + " | ".join(r) + " |" for r in rows), ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "heavy-request.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
