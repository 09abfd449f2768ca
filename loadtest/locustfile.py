"""Locust load test of the streaming ``tts`` model over gRPC, through ``tts_triton.client.TTSClient``.

Each simulated user streams one sentence at a time, the texts of ``tts_triton.bench.workload`` (the bench's
sentence set, in turn; with TTS_REPEAT_RATIO, a share of repeats of earlier texts and new texts otherwise), with a
voice and an emotion drawn from the server's voice bank (a repeat keeps its original's, so that a server with an
utterance cache can answer it from there), and reports two request types to Locust:

- ``grpc first_chunk``: time from sending the request to the first audio chunk;
- ``grpc stream``: time to the end of the stream (failures are reported here, typed by TTSError subclass).

Locust rounds response times above 100 ms in its statistics, so every request is also recorded
exactly; at test stop each process prints a percentile table and, if TTS_RESULTS_DIR is set, writes
``requests[-<worker>].csv`` (one row per request) and ``latency_percentiles[-<worker>].csv`` there.

Configuration: ``--host grpc://HOST:8001`` (default ``$TTS_HOST``, else grpc://localhost:8001), several of them
comma-separated or ``dns:///NAME:8001``: the users of one Locust process share one client, whose balancer sends
each stream to the server with the fewest of the process's streams in flight; and environment variables:

- TTS_TIMEOUT: seconds allowed per request (default 60);
- TTS_VOICES / TTS_EMOTIONS: comma-separated subsets of the voice bank to draw from (default: all);
  TTS_EMOTIONS=none sends no EMOTION (the server's default);
- TTS_WAIT_MIN / TTS_WAIT_MAX: think time between a user's requests, seconds (default 0 / 1);
- TTS_REPEAT_RATIO: share (0-1) of requests that repeat a text this process completed earlier (default: none, the
  plain sentence cycle);
- TTS_RESULTS_DIR: folder for the exact per-request records (default: none, the table is only printed).
"""

from __future__ import annotations

import csv
import functools
import logging
import os
import random
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc.experimental.gevent as grpc_gevent
import numpy as np
from locust import User, between, events, task
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from tts_triton.bench.workload import RequestRecord, Workload
from tts_triton.client import TTSClient, TTSError, VoiceCatalog
from tts_triton.core.endpoints import DEFAULT_GRPC_URL

# Locust runs users as greenlets: grpc must cooperate with gevent (before any channel exists).
grpc_gevent.init_gevent()

REQUEST_TYPE = "grpc"
PERCENTILES = (50, 90, 95, 99)


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _pick(offered: tuple[str, ...], wanted: list[str], what: str) -> list[str]:
    """The subset of ``offered`` named in ``wanted`` (all of it when ``wanted`` is empty)."""
    unknown = set(wanted) - set(offered)
    if unknown:
        raise ValueError(f"{what} not in the server's voice bank: {sorted(unknown)}; it offers {list(offered)}")
    return wanted or list(offered)


RECORDS: list[RequestRecord] = []
#: The texts of this process's users; a repeated text keeps the (voice, emotion) it was first sent with.
WORKLOAD = Workload(float(os.environ["TTS_REPEAT_RATIO"]) if os.environ.get("TTS_REPEAT_RATIO") else None)
STYLES: dict[str, tuple[str, str | None]] = {}


@functools.cache
def _voice_bank(host: str, timeout: float) -> VoiceCatalog:
    with TTSClient(host, timeout=timeout) as client:
        return client.voices()


_CLIENTS: dict[tuple[str, float], TTSClient] = {}
_CLIENTS_LOCK = threading.Lock()  # users start side by side, and making a client lets other greenlets run


def _shared_client(host: str, timeout: float) -> TTSClient:
    """The process's client (thread- and greenlet-safe): one balancer sees every user's streams."""
    with _CLIENTS_LOCK:
        if (host, timeout) not in _CLIENTS:
            _CLIENTS[host, timeout] = TTSClient(host, timeout=timeout)
        return _CLIENTS[host, timeout]


class TTSStreamUser(User):
    """Streams one sentence per task through the process's shared client (a gRPC stream of its own)."""

    host = os.environ.get("TTS_HOST", f"grpc://{DEFAULT_GRPC_URL}")
    wait_time = between(float(os.environ.get("TTS_WAIT_MIN", "0")), float(os.environ.get("TTS_WAIT_MAX", "1")))
    timeout = float(os.environ.get("TTS_TIMEOUT", "60"))

    def on_start(self) -> None:
        try:
            bank = _voice_bank(self.host, self.timeout)
            wanted_emotions = _env_list("TTS_EMOTIONS")
            self.voices = _pick(bank.voices, _env_list("TTS_VOICES"), "TTS_VOICES")
            self.emotions: list[str | None] = (
                [None] if wanted_emotions == ["none"] else list(_pick(bank.emotions, wanted_emotions, "TTS_EMOTIONS"))
            )
        except (TTSError, ValueError) as e:  # server unreachable, no voice bank, or a bad TTS_VOICES/TTS_EMOTIONS
            self._fire("voices", 0.0, 0, e)
            raise StopUser() from e
        self.client = _shared_client(self.host, self.timeout)

    @task
    def stream(self) -> None:
        index, text, repeat = WORKLOAD.next()
        voice, emotion = STYLES.get(text) or (random.choice(self.voices), random.choice(self.emotions))
        record = RequestRecord(index=index, start=time.time(), text=text, repeat=repeat, voice=voice,
                               emotion=emotion or "")
        began = time.perf_counter()
        samples = sample_rate = 0
        error: Exception | None = None
        try:
            for chunk in self.client.stream(text, voice=voice, emotion=emotion):
                if record.first_chunk is None:
                    record.first_chunk = record.start + chunk.elapsed
                    self._fire("first_chunk", chunk.elapsed, chunk.audio.size, None)
                samples += chunk.audio.size
                record.chunks += 1
                sample_rate = chunk.sample_rate
            if record.first_chunk is None:
                error = TTSError("the stream ended without audio")
        except TTSError as e:
            error = e
        total = time.perf_counter() - began
        self._fire("stream", total, samples, error)
        record.end = record.start + total
        record.audio_seconds = samples / sample_rate if sample_rate else 0.0
        record.error = None if error is None else f"{type(error).__name__}: {error}"
        if record.ok:
            STYLES.setdefault(text, (voice, emotion))
            WORKLOAD.completed(text)
        RECORDS.append(record)

    def _fire(self, name: str, seconds: float, samples: int, exception: Exception | None) -> None:
        """Report to Locust: response_time in ms, response_length in audio samples."""
        self.environment.events.request.fire(
            request_type=REQUEST_TYPE, name=name, response_time=seconds * 1000.0, response_length=samples,
            exception=exception, context={},
        )


def percentile_table(records: list[RequestRecord]) -> list[dict[str, Any]]:
    """Exact percentiles (ms; real-time factor unitless) of successful requests, one row per metric."""
    ok = [r for r in records if r.ok]
    metrics = {
        "first_chunk_ms": [(r.first_chunk - r.start) * 1000.0 for r in ok if r.first_chunk is not None],
        "stream_ms": [(r.end - r.start) * 1000.0 for r in ok if r.end is not None],
        "real_time_factor": [(r.end - r.start) / r.audio_seconds for r in ok
                             if r.end is not None and r.audio_seconds > 0],
    }
    rows = []
    for metric, values in metrics.items():
        row: dict[str, Any] = {"metric": metric, "count": len(values), "failures": len(records) - len(ok)}
        stats = np.percentile(values, PERCENTILES).tolist() if values else [float("nan")] * len(PERCENTILES)
        row |= {f"p{p}": round(v, 3) for p, v in zip(PERCENTILES, stats, strict=True)}
        row |= {"mean": round(float(np.mean(values)), 3) if values else float("nan"),
                "max": round(max(values), 3) if values else float("nan")}
        rows.append(row)
    return rows


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@events.test_stop.add_listener
def _report_exact_latencies(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner) or not RECORDS:
        return
    table = percentile_table(RECORDS)
    header = list(table[0])
    print("\nExact latencies of successful streams (Locust's own table rounds above 100 ms):")
    print("  ".join(f"{h:>16}" for h in header))
    for row in table:
        print("  ".join(f"{row[h]!s:>16}" for h in header))
    results = os.environ.get("TTS_RESULTS_DIR")
    if results:
        suffix = f"-{environment.runner.client_id}" if isinstance(environment.runner, WorkerRunner) else ""
        folder = Path(results)
        folder.mkdir(parents=True, exist_ok=True)
        _write_csv(folder / f"requests{suffix}.csv", [asdict(r) for r in RECORDS])
        _write_csv(folder / f"latency_percentiles{suffix}.csv", table)
    RECORDS.clear()



@events.quit.add_listener
def _exit_now(exit_code: int, **_: Any) -> None:
    """Locust has written every output; leave without waiting on threads. A stream cut off at stop leaves
    tritonclient's gRPC reader thread behind, and the interpreter would wait on it at exit (seen: the process
    still alive minutes after Locust logged its exit)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
