"""Locust load test of the OpenAI-compatible gateway (``tts-triton gateway``), beside the gRPC one.

Each simulated user posts one text at a time to ``/v1/audio/speech`` (the texts, repeats and exact
per-request records of ``locustfile.py``, which this file imports) with an OpenAI voice name and reads the
streamed body, reporting ``gateway first_byte`` (time to the first audio byte) and ``gateway stream`` (time
to the end; failures typed by HTTP status); each record's audio seconds are read from the whole body
(:func:`audio_seconds`), for the real-time factor. ``tts-triton loadtest --gateway URL`` runs it.

Configuration: ``--host http://HOST:8080``, the environment variables of ``locustfile.py`` (TTS_TIMEOUT,
TTS_WAIT_MIN/MAX, TTS_REPEAT_RATIO, TTS_RESULTS_DIR) and:

- TTS_GATEWAY_VOICES: comma-separated voices to draw from (default: alloy, nova, onyx, echo);
- TTS_GATEWAY_FORMAT: ``response_format`` (default mp3);
- TTS_GATEWAY_KEY: API key sent as ``Authorization: Bearer`` (default: none).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import requests
from locust import User, between, task

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locustfile as grpc_test  # noqa: E402 - its records, workload and reporting hooks are shared

from tts_triton.bench.workload import RequestRecord  # noqa: E402
from tts_triton.gateway.encoders import FORMATS, OUTPUT_RATE  # noqa: E402

REQUEST_TYPE = "gateway"


def audio_seconds(body: bytes, response_format: str) -> float:
    """Seconds of audio in a whole response body: counted for pcm and wav (16-bit mono at OUTPUT_RATE after wav's
    44-byte header), decoded with PyAV for the compressed formats."""
    if response_format == "pcm":
        return len(body) / 2 / OUTPUT_RATE
    if response_format == "wav":
        return max(0, len(body) - 44) / 2 / OUTPUT_RATE
    import io

    import av

    with av.open(io.BytesIO(body)) as container:
        return sum(frame.samples / frame.sample_rate for frame in container.decode(audio=0))


class GatewayUser(User):
    """Streams one text per task from the gateway over its own HTTP connection."""

    host = os.environ.get("TTS_HOST", "http://localhost:8080")
    wait_time = between(float(os.environ.get("TTS_WAIT_MIN", "0")), float(os.environ.get("TTS_WAIT_MAX", "1")))
    timeout = float(os.environ.get("TTS_TIMEOUT", "60"))
    voices = grpc_test._env_list("TTS_GATEWAY_VOICES") or ["alloy", "nova", "onyx", "echo"]
    response_format = os.environ.get("TTS_GATEWAY_FORMAT", "mp3")

    def on_start(self) -> None:
        if self.response_format not in FORMATS:
            raise ValueError(f"TTS_GATEWAY_FORMAT={self.response_format!r}: not one of {', '.join(FORMATS)}")
        self.session = requests.Session()
        if key := os.environ.get("TTS_GATEWAY_KEY"):
            self.session.headers["Authorization"] = f"Bearer {key}"

    def on_stop(self) -> None:
        if hasattr(self, "session"):
            self.session.close()

    @task
    def speech(self) -> None:
        index, text, repeat = grpc_test.WORKLOAD.next()
        voice = grpc_test.STYLES.get(text, (random.choice(self.voices), None))[0]
        record = RequestRecord(index=index, start=time.time(), text=text, repeat=repeat, voice=voice)
        began = time.perf_counter()
        size, error, parts = 0, None, []
        body = {"model": "tts-1", "voice": voice, "input": text, "response_format": self.response_format}
        try:
            with self.session.post(f"{self.host.rstrip('/')}/v1/audio/speech", json=body, stream=True,
                                   timeout=self.timeout) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
                for part in response.iter_content(4096):
                    if part and record.first_chunk is None:
                        elapsed = time.perf_counter() - began
                        record.first_chunk = record.start + elapsed
                        self._fire("first_byte", elapsed, len(part), None)
                    size += len(part)
                    parts.append(part)
                    record.chunks += 1
            record.audio_seconds = audio_seconds(b"".join(parts), self.response_format)
        except (requests.RequestException, RuntimeError, ValueError) as e:
            error = e
        total = time.perf_counter() - began
        self._fire("stream", total, size, error)
        record.end = record.start + total
        record.error = None if error is None else f"{type(error).__name__}: {error}"
        if record.ok:
            grpc_test.STYLES.setdefault(text, (voice, None))
            grpc_test.WORKLOAD.completed(text)
        grpc_test.RECORDS.append(record)

    def _fire(self, name: str, seconds: float, size: int, exception: Exception | None) -> None:
        """Report to Locust: response_time in ms, response_length in bytes."""
        self.environment.events.request.fire(request_type=REQUEST_TYPE, name=name, response_time=seconds * 1000.0,
                                             response_length=size, exception=exception, context={})
