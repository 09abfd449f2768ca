"""The OpenAI-compatible gateway, driven by the official ``openai`` client, in front of a real tritonserver."""

from __future__ import annotations

import concurrent.futures
import io
import threading
import time
import wave
from collections.abc import Callable
from pathlib import Path

import av
import httpx
import numpy as np
import openai
import pytest
import soundfile as sf
import tritonclient.grpc as grpcclient

from tts_triton.client import HttpTTSClient, TTSClient
from tts_triton.core.contract import DECODER
from tts_triton.gateway import GatewayConfig
from tts_triton.gateway.encoders import FORMATS, OUTPUT_RATE
from tts_triton.gateway.server import BackgroundGateway
from tts_triton.gateway.voice_map import VoiceMap
from tts_triton.processes.triton_server import TritonServer, free_port

#: One sentence the test model speaks in about 0.25 s (its seeded stop gate fires early on it).
SENTENCE = "The quick brown fox jumps over the lazy dog while the cat watches from the old wooden fence."
#: About 3 s of audio: an encoder's padding (MP3, AAC: under 0.1 s) stays well below 5 % of it.
TEXT = " ".join([SENTENCE] * 12)
#: About 1 s of audio: enough to measure speeds and levels on.
SHORT_TEXT = " ".join([SENTENCE] * 4)
#: About 6 s of audio, decoded in several seconds here: a stream with a distinct start and end.
LONG_TEXT = " ".join([SENTENCE] * 24)
KEY = "sk-test-key"


@pytest.fixture(scope="module")
def client(gateway: BackgroundGateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def offline_duration(server: TritonServer) -> float:
    """Seconds of audio ``tts_offline`` makes of TEXT with the preset OpenAI's ``alloy`` maps to."""
    with TTSClient(server.grpc_url) as grpc_client:
        voice = VoiceMap().voice("alloy", grpc_client.voices())
    with HttpTTSClient(server.http_url, timeout=120) as http:
        return http.synthesize(TEXT, voice=voice).duration


def decode(data: bytes, response_format: str) -> tuple[np.ndarray, int]:
    """Samples and rate: raw int16 for pcm, PyAV (FFmpeg) for AAC, soundfile (libsndfile) for the rest."""
    if response_format == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768, OUTPUT_RATE
    if response_format == "aac":
        with av.open(io.BytesIO(data)) as container:
            frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
            return np.concatenate(frames), container.streams.audio[0].sample_rate
    parts = []
    with sf.SoundFile(io.BytesIO(data)) as f:  # blockwise: a streamed FLAC's header says "length unknown"
        while (block := f.read(65536, dtype="float32")).size:
            parts.append(block)
        return np.concatenate(parts), f.samplerate


@pytest.mark.parametrize("response_format", list(FORMATS))
def test_every_format_decodes_to_the_offline_duration(client: openai.OpenAI, response_format: str,
                                                      offline_duration: float) -> None:
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=response_format)
    samples, rate = decode(audio.content, response_format)
    assert offline_duration > 2.0
    assert abs(samples.shape[0] / rate - offline_duration) / offline_duration < 0.05
    assert np.abs(samples).max() > 0.01  # audio, not silence


def test_sse_sends_base64_deltas_then_done(gateway: BackgroundGateway, offline_duration: float) -> None:
    import base64
    import json

    body = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "pcm", "stream_format": "sse"}
    with httpx.stream("POST", f"{gateway.url}/v1/audio/speech", json=body, timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: "):]) for line in response.iter_lines() if line.startswith("data: ")]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) > 2
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["usage"]["output_tokens"] == len(events) - 1
    samples, rate = decode(b"".join(base64.b64decode(e["audio"]) for e in events[:-1]), "pcm")
    assert abs(samples.shape[0] / rate - offline_duration) / offline_duration < 0.05


def test_streaming_response_delivers_first_bytes_long_before_the_end(client: openai.OpenAI) -> None:
    # 40 sentences (3.7k characters, under the 4096 limit). A response buffered whole would send its first bytes at
    # the end (ratio ~1); streamed, they came after 0.21-0.24 s of 2.26 s on a quiet machine and 0.52 s of 2.05 s in
    # a clean-clone run beside the other worker's tests: half the total separates the two with room for load
    text = " ".join([SENTENCE] * 40)
    start = time.perf_counter()
    with client.audio.speech.with_streaming_response.create(model="tts-1", voice="alloy", input=text,
                                                            response_format="mp3") as response:
        arrivals = [time.perf_counter() - start for part in response.iter_bytes(1024) if part]
    first, total = arrivals[0], arrivals[-1]
    assert len(arrivals) > 10
    assert first < 0.5 * total, f"first bytes after {first:.2f} s of {total:.2f} s"


@pytest.mark.parametrize(("field", "kwargs"), [
    ("voice", {"voice": "nobody"}),
    ("response_format", {"response_format": "ogg"}),
    ("speed", {"speed": 5.0}),
    ("speed", {"speed": 0.2}),
    ("input", {"input": "   "}),
    ("stream_format", {"extra_body": {"stream_format": "websocket"}}),
    ("instructions", {"extra_body": {"instructions": 7}}),
])
def test_bad_requests_are_bad_request_errors_naming_the_field(client: openai.OpenAI, field: str,
                                                              kwargs: dict) -> None:
    request = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", **kwargs}
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(**request)
    assert field in caught.value.message
    assert caught.value.body["param"] == field and caught.value.body["type"] == "invalid_request_error"


def _seconds(client: openai.OpenAI, **request: object) -> float:
    content = client.audio.speech.create(model="tts-1", voice="alloy", response_format="pcm", **request).content
    return len(content) / 2 / OUTPUT_RATE


def test_openai_s_whole_speed_range_with_durations_in_order(client: openai.OpenAI) -> None:
    """0.25 and 4: the model's rate control at its limit (0.5, 2) times the gateway's time-stretch (0.5, 2)."""
    seconds = {speed: _seconds(client, input=SHORT_TEXT, speed=speed) for speed in (0.25, 1.0, 4.0)}
    assert seconds[0.25] > seconds[1.0] > seconds[4.0]
    assert 3.4 < seconds[0.25] / seconds[1.0] < 4.6 and 3.4 < seconds[1.0] / seconds[4.0] < 4.6, seconds


def test_nulls_mean_the_defaults_and_unknown_fields_are_ignored(client: openai.OpenAI) -> None:
    extra = {"speed": None, "response_format": None, "instructions": None, "stream_format": None,
             "language": "en", "seed": 7}
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", extra_body=extra)
    assert audio.response.headers["content-type"] == "audio/mpeg" and len(audio.content) > 1000


def test_a_wav_that_python_s_wave_opens_at_24_khz(client: openai.OpenAI, offline_duration: float) -> None:
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav")
    with wave.open(io.BytesIO(audio.content)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (OUTPUT_RATE, 1, 2)
        frames = w.readframes(w.getnframes())
    assert abs(len(frames) / 2 / OUTPUT_RATE - offline_duration) / offline_duration < 0.05


def test_instructions_set_volume_rate_and_emotion(client: openai.OpenAI) -> None:
    def pcm(**request: object) -> np.ndarray:
        content = client.audio.speech.create(model="tts-1", voice="alloy", input=SHORT_TEXT, response_format="pcm",
                                             **request).content
        return np.frombuffer(content, "<i2").astype(np.float32) / 32768

    plain, whisper, slow = pcm(), pcm(instructions="Whisper it."), pcm(instructions="Speak slowly.")
    level = 20 * np.log10(np.sqrt(np.mean(whisper ** 2)) / np.sqrt(np.mean(plain ** 2)))
    assert -17 < level < -13, level  # the table's -15 dB
    assert abs(len(slow) / len(plain) - 1 / 0.85) < 0.05
    assert not np.array_equal(pcm(instructions="Sound angry."), plain)


def test_models_are_listed_in_openai_s_shape(client: openai.OpenAI, gateway: BackgroundGateway) -> None:
    assert {m.id for m in client.models.list()} == {"tts-1", "tts-1-hd", "gpt-4o-mini-tts"}
    audio_models = httpx.get(f"{gateway.url}/v1/audio/models").json()
    assert audio_models["object"] == "list" and [m["id"] for m in audio_models["models"]] == [
        m["id"] for m in audio_models["data"]]


def test_limits_answer_413_and_errors_are_json(client: openai.OpenAI, gateway: BackgroundGateway) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.audio.speech.create(model="tts-1", voice="alloy", input="word " * 1000)
    assert caught.value.status_code == 413 and caught.value.body["param"] == "input"
    big = httpx.post(f"{gateway.url}/v1/audio/speech", content=b"x" * 100_000, timeout=10)
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
    for response in (httpx.get(f"{gateway.url}/nowhere"), httpx.get(f"{gateway.url}/v1/audio/speech"),
                     httpx.post(f"{gateway.url}/v1/audio/speech", content=b"{not json")):
        assert response.status_code in (400, 404, 405) and set(response.json()["error"]) == {
            "message", "type", "param", "code"}


def test_voices_health_readiness_and_metrics(gateway: BackgroundGateway, client: openai.OpenAI) -> None:
    voices = httpx.get(f"{gateway.url}/v1/audio/voices").json()
    assert {"alloy", "nova", "onyx"} <= set(voices["openai_voices"]) and voices["voices"]
    assert set(voices["formats"]) == set(FORMATS) and voices["emotions"]
    assert httpx.get(f"{gateway.url}/healthz").status_code == 200
    assert httpx.get(f"{gateway.url}/readyz").json() == {"status": "ready"}
    emotion = voices["emotions"][-1]
    client.audio.speech.create(model="tts-1", voice=voices["voices"][0]["id"], input="Hello.",
                               instructions=f"Sound {emotion}, please.", response_format="wav")
    metrics = httpx.get(f"{gateway.url}/metrics").text
    assert 'tts_gateway_requests_total{format="wav",outcome="ok"}' in metrics
    assert "tts_gateway_first_byte_seconds_bucket" in metrics and "tts_gateway_streams_in_flight 0.0" in metrics


def _decoder_calls(server: TritonServer) -> int:
    with grpcclient.InferenceServerClient(server.grpc_url) as stats:
        model = stats.get_inference_statistics(DECODER, as_json=True)["model_stats"][0]
        return int(model["inference_count"])


def test_a_disconnecting_client_stops_decoding_within_a_second(gateway: BackgroundGateway,
                                                               server: TritonServer) -> None:
    body = {"model": "tts-1", "voice": "alloy", "input": LONG_TEXT, "response_format": "pcm"}
    with httpx.stream("POST", f"{gateway.url}/v1/audio/speech", json=body, timeout=120) as response:
        assert response.status_code == 200
        received = 0
        for part in response.iter_bytes():
            received += len(part)
            if received > 2 * OUTPUT_RATE:  # one second of the ~6 s in: the stream is well under way
                break
        before = _decoder_calls(server)
    left = time.perf_counter()  # the connection is closed here
    samples = [(0.0, before)]
    while time.perf_counter() - left < 3.0:
        time.sleep(0.1)
        samples.append((time.perf_counter() - left, _decoder_calls(server)))
    last_growth = max(t for (t, n), (_, prev) in zip(samples[1:], samples, strict=False) if n > prev) \
        if samples[-1][1] > before else 0.0
    assert last_growth < 1.0, f"decoder calls still growing {last_growth:.2f} s after the disconnect: {samples}"
    metrics = httpx.get(f"{gateway.url}/metrics").text
    assert 'tts_gateway_requests_total{format="pcm",outcome="disconnected"} 1.0' in metrics


def test_keys_and_the_stream_limit(server: TritonServer) -> None:
    config = GatewayConfig(triton_endpoints=(server.grpc_url,), api_keys=frozenset({KEY}), max_streams=1)
    with BackgroundGateway(config, port=free_port()) as limited:
        anonymous = openai.OpenAI(base_url=f"{limited.url}/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            anonymous.audio.speech.create(model="tts-1", voice="alloy", input="Hello.")
        keyed = openai.OpenAI(base_url=f"{limited.url}/v1", api_key=KEY, max_retries=0, timeout=120)
        started = threading.Event()

        def long_stream() -> int:
            with keyed.audio.speech.with_streaming_response.create(
                    model="tts-1", voice="alloy", input=LONG_TEXT, response_format="pcm") as response:
                parts = response.iter_bytes()
                size = len(next(parts))
                started.set()
                return size + sum(len(p) for p in parts)

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(long_stream)
            assert started.wait(60)
            with pytest.raises(openai.RateLimitError) as caught:
                keyed.audio.speech.create(model="tts-1", voice="alloy", input="Hello.")
            assert caught.value.response.headers["retry-after"] == "1"
            assert running.result() > 0
        assert keyed.audio.speech.create(model="tts-1", voice="alloy", input="Hello.").content


def test_many_requests_without_failures(client: openai.OpenAI) -> None:
    """The short version of the soak (``tts-triton bench-gateway --soak 1000``): concurrent requests, 0 failures."""
    def one(i: int) -> int:
        fmt = list(FORMATS)[i % len(FORMATS)]
        return len(client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.",
                                              response_format=fmt).content)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        sizes = list(pool.map(one, range(48)))
    assert min(sizes) > 0


@pytest.mark.slow
def test_triton_down_is_503_and_the_gateway_recovers(make_triton: Callable[..., TritonServer],
                                                     model_repository: Path) -> None:
    server = make_triton(model_repository)
    server.start()
    with BackgroundGateway(GatewayConfig(triton_endpoints=(server.grpc_url,)), port=free_port()) as running:
        api = openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0, timeout=60)
        assert api.audio.speech.create(model="tts-1", voice="alloy", input="Hello.").content
        server.stop()
        with pytest.raises(openai.InternalServerError) as caught:
            api.audio.speech.create(model="tts-1", voice="alloy", input="Hello.")
        assert caught.value.status_code == 503 and "unavailable" in caught.value.message
        assert httpx.get(f"{running.url}/readyz").status_code == 503
        server.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert api.audio.speech.create(model="tts-1", voice="alloy", input="Hello.").content
                break
            except openai.InternalServerError as e:
                assert e.status_code == 503 and time.monotonic() < deadline
                time.sleep(0.5)
        assert httpx.get(f"{running.url}/readyz").status_code == 200


def test_a_failure_after_the_status_line_ends_the_stream_visibly(server: TritonServer) -> None:
    """Synthesis timing out mid-stream answered a 200 with truncated audio; now the body is cut short (no final
    chunk: every client raises), SSE ends with an error event, each is counted as truncated, and no traceback."""
    import json
    import logging

    # 40 sentences: 2.3 s of synthesis on a quiet machine, its first chunk in ~0.1-0.5 s: cut off by 1 s
    config = GatewayConfig(triton_endpoints=(server.grpc_url,), request_timeout_s=1.0)
    text = " ".join([SENTENCE] * 40)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(n) for n in ("uvicorn", "uvicorn.error", "tts_triton")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        with BackgroundGateway(config, port=free_port()) as limited:
            body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm"}
            received = 0
            with (pytest.raises(httpx.RemoteProtocolError, match="incomplete"),
                  httpx.stream("POST", f"{limited.url}/v1/audio/speech", json=body, timeout=60) as response):
                assert response.status_code == 200
                for part in response.iter_bytes():
                    received += len(part)
            assert received > 0
            api = openai.OpenAI(base_url=f"{limited.url}/v1", api_key="unused", max_retries=0, timeout=60)
            with pytest.raises(openai.APIConnectionError):
                api.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="mp3")
            with httpx.stream("POST", f"{limited.url}/v1/audio/speech", json={**body, "stream_format": "sse"},
                              timeout=60) as response:
                events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
            assert events[0]["type"] == "speech.audio.delta"
            assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "timeout"
            metrics = httpx.get(f"{limited.url}/metrics").text
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert 'tts_gateway_requests_total{format="pcm",outcome="truncated"} 2.0' in metrics
    assert 'tts_gateway_requests_total{format="mp3",outcome="truncated"} 1.0' in metrics
    assert not [r for r in records if r.exc_info or r.levelno >= logging.ERROR], records
    assert sum("failed after" in r.getMessage() for r in records) == 3


def test_a_key_s_requests_per_minute_are_bounded_with_retry_after(server: TritonServer) -> None:
    config = GatewayConfig(triton_endpoints=(server.grpc_url,), api_keys=frozenset({KEY, "other"}),
                           requests_per_minute=2)
    with BackgroundGateway(config, port=free_port()) as limited:
        keyed = openai.OpenAI(base_url=f"{limited.url}/v1", api_key=KEY, max_retries=0, timeout=60)
        for _ in range(2):
            assert keyed.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="pcm").content
        with pytest.raises(openai.RateLimitError) as caught:
            keyed.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="pcm")
        assert 20 <= int(caught.value.response.headers["retry-after"]) <= 30  # a token every 30 s
        assert "2 requests per minute" in caught.value.message
        other = openai.OpenAI(base_url=f"{limited.url}/v1", api_key="other", max_retries=0, timeout=60)
        assert other.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="pcm").content
        assert 'tts_gateway_refusals_total{limit="key_rate"} 1.0' in httpx.get(f"{limited.url}/metrics").text
