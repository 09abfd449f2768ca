"""The gateway as an operator exposes it (issue 55's probes): ``tts-triton gateway`` in a process of its own with two
API keys and ``--max-streams 8`` in front of a real tritonserver, driven by the ``openai`` client, httpx and
websockets. No client can stall it, starve another key, or buy unbounded audio; malformed input gets a 4xx or an
answer, never a traceback; it is still serving at the end."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import psutil
import pytest
import tritonclient.grpc as grpcclient
from waiting import wait_until
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State
from websockets.sync.client import connect
from websockets.uri import parse_uri

from tts_triton.core.contract import DECODER
from tts_triton.processes.triton_server import TritonServer, free_port

KEYS = ("sk-exposed-a", "sk-exposed-b")
MAX_STREAMS = 8
SENTENCE = "The quick brown fox jumps over the lazy dog while the cat watches from the old wooden fence. "


@dataclass(frozen=True)
class Exposed:
    url: str
    pid: int
    log: Path

    def ws(self, voice: str = "alloy") -> str:
        return self.url.replace("http", "ws", 1) + f"/v1/text-to-speech/{voice}/stream-input?output_format=pcm_24000"

    def api(self, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=120)

    def rss_mib(self) -> float:
        return psutil.Process(self.pid).memory_info().rss / 2**20


@pytest.fixture(scope="module")
def exposed(server: TritonServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exposed]:
    log = tmp_path_factory.mktemp("exposed") / "gateway.log"
    env = {**os.environ, "TTS_GATEWAY_API_KEYS": ",".join(KEYS)}
    for attempt in range(3):  # a port free when picked may be bound by another test's server before the gateway is up
        port = free_port()
        command = [sys.executable, "-m", "tts_triton.cli", "gateway", "--port", str(port), "--triton-url",
                   server.grpc_url, "--max-streams", str(MAX_STREAMS)]
        with open(log, "w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"

        def ready(url: str = url, process: subprocess.Popen = process) -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            return process.poll() is not None  # exited: its log says why

        wait_until(ready, 60, "the gateway's readiness")
        if process.poll() is None:
            break
        assert "address already in use" in log.read_text() and attempt < 2, log.read_text()
    try:
        yield Exposed(url, process.pid, log)
    finally:
        process.terminate()
        process.wait(30)


def _healthz_waits(gateway: Exposed, seconds: float) -> list[float]:
    waits, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        assert httpx.get(f"{gateway.url}/healthz", timeout=60).status_code == 200
        waits.append(time.perf_counter() - start)
        time.sleep(0.1)
    return waits


def _session(gateway: Exposed, texts: list[str], key: str | None = KEYS[0]) -> tuple[list[dict], int | None]:
    messages = []
    with connect(gateway.ws(), additional_headers={"xi-api-key": key} if key else {}, open_timeout=30) as socket:
        with contextlib.suppress(ConnectionClosed):
            for text in texts:
                socket.send(text)
        with contextlib.suppress(ConnectionClosed):
            while True:
                messages.append(json.loads(socket.recv(timeout=120)))
    return messages, socket.close_code


def test_a_16_kb_message_leaves_healthz_answering_within_a_second(exposed: Exposed) -> None:
    with connect(exposed.ws(), additional_headers={"xi-api-key": KEYS[0]}, open_timeout=30) as socket:
        socket.send(json.dumps({"text": " "}))
        socket.send(json.dumps({"text": "Go now. " * 2048}))
        waits = _healthz_waits(exposed, 3.0)
        assert json.loads(socket.recv(timeout=60)).get("audio")
    assert max(waits) < 1.0, f"/healthz waited {max(waits):.2f} s"


def test_80_keyless_sockets_leave_a_keyed_client_served(exposed: Exposed) -> None:
    with contextlib.ExitStack() as stack:
        for _ in range(80):
            with contextlib.suppress(Exception):  # past the per-address cap a socket is closed at once
                stack.enter_context(connect(exposed.ws(), open_timeout=30))
        messages, code = _session(exposed, [json.dumps({"text": SENTENCE}), json.dumps({"text": ""})])
    assert code == 1000 and messages[-1] == {"isFinal": True} and any(m.get("audio") for m in messages)


@contextlib.contextmanager
def _unread_session(gateway: Exposed, texts: list[str]) -> Iterator[socket.socket]:
    """A stream-input session that sent ``texts`` (one message each) and whose client reads nothing after the
    handshake: a 4 KiB receive buffer and no library reading ahead (websockets' own sans-I/O protocol, driven by
    hand); the socket is yielded for the caller to read from, or not."""
    host, port = gateway.url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window stays small
        sock.settimeout(30)
        sock.connect((host, int(port)))
        protocol = ClientProtocol(parse_uri(gateway.ws()))
        request = protocol.connect()
        request.headers["xi-api-key"] = KEYS[0]
        protocol.send_request(request)
        sock.sendall(b"".join(protocol.data_to_send()))
        while protocol.state is State.CONNECTING and protocol.handshake_exc is None:
            protocol.receive_data(sock.recv(4096))
        assert protocol.state is State.OPEN, protocol.handshake_exc
        for text in texts:
            protocol.send_text(json.dumps({"text": text}).encode())
        sock.sendall(b"".join(protocol.data_to_send()))
        yield sock


def _decoder_calls(server: TritonServer) -> int:
    with grpcclient.InferenceServerClient(server.grpc_url) as stats:
        return int(stats.get_inference_statistics(DECODER, as_json=True)["model_stats"][0].get("inference_count", 0))


#: ~37,600 characters in 400 messages: minutes of synthesis for a session that is read.
UNREAD_TEXTS = [" ", *[SENTENCE] * 400]


def test_a_session_that_never_reads_pauses_synthesis_holds_memory_and_resumes_when_read(
        exposed: Exposed, server: TritonServer) -> None:
    """Synthesis went on into an unbounded queue (1.8 MiB/s per session, and Triton's decoder calls for the whole
    text: +267 in 20 s here and rising); now it waits for the client: the decoder calls stop growing once the
    session's buffers are full (+117 and flat), the gateway holds its memory, and both go on once the client reads."""
    calls = [_decoder_calls(server)]
    with _unread_session(exposed, UNREAD_TEXTS) as sock:
        before = peak = exposed.rss_mib()
        for _ in range(7):  # 28 s: before the server's keep-alive gives up on its unanswered ping (40 s)
            time.sleep(4)
            calls.append(_decoder_calls(server))
            peak = max(peak, exposed.rss_mib())
        paused = calls[-1] - calls[-3]
        sock.settimeout(1)
        end = time.monotonic() + 5
        with contextlib.suppress(TimeoutError):
            while time.monotonic() < end and sock.recv(65536):
                pass
        resumed = _decoder_calls(server) - calls[-1]
    print(f"gateway RSS {before:.0f} -> peak {peak:.0f} MiB; decoder calls {calls}")
    assert calls[1] > calls[0] and paused == 0, f"decoder calls while not read: {calls}"
    assert peak - before <= 40, f"the gateway grew {peak - before:.0f} MiB ({before:.0f} -> {peak:.0f}) in 28 s"
    assert resumed > 0, "synthesis did not resume once the client read"


def test_one_key_holding_every_stream_leaves_the_other_key_served(exposed: Exposed) -> None:
    holder, started, statuses = exposed.api(KEYS[0]), threading.Barrier(MAX_STREAMS + 1, timeout=120), []

    def hold() -> int:
        try:
            with holder.audio.speech.with_streaming_response.create(
                    model="tts-1", voice="alloy", input=SENTENCE * 30, response_format="pcm") as response:
                parts = response.iter_bytes()
                next(parts)
                started.wait()
                return 200
        except openai.RateLimitError as e:
            started.wait()
            return e.status_code

    with concurrent.futures.ThreadPoolExecutor(MAX_STREAMS) as pool:
        holding = [pool.submit(hold) for _ in range(MAX_STREAMS)]
        started.wait()
        other = exposed.api(KEYS[1]).audio.speech.create(model="tts-1", voice="alloy", input="Still served.",
                                                         response_format="pcm")
        statuses = [f.result() for f in holding]
    assert len(other.content) > 1000
    assert statuses.count(200) == MAX_STREAMS // 4 and statuses.count(429) == MAX_STREAMS - MAX_STREAMS // 4


@pytest.mark.parametrize(("text", "speed"), [("9" * 4096, 1.0),
                                             ("<speak>" + '<break time="10s"/>' * 180 + "</speak>", 0.25)],
                         ids=["4096-digits", "180-breaks"])
def test_small_requests_for_huge_audio_are_refused_within_5_s(exposed: Exposed, text: str, speed: float) -> None:
    start = time.perf_counter()
    with pytest.raises(openai.APIStatusError) as caught:
        exposed.api(KEYS[0]).audio.speech.create(model="tts-1", voice="alloy", input=text, speed=speed)
    assert time.perf_counter() - start < 5.0
    assert caught.value.status_code == 413 and caught.value.body["code"] == "audio_too_long"
    assert "limit is 900 s" in caught.value.message


@pytest.mark.parametrize("body", [b"[" * 30_000 + b"]" * 30_000,  # under the 64 KiB body limit
                                  b'{"model": "tts-1", "voice": "alloy", "input": "Hi \\ud800."}',
                                  b'{"model": "tts-1", "voice": "alloy\\udfff", "input": "Hi."}'],
                         ids=["nested", "surrogate-input", "surrogate-voice"])
def test_malformed_bodies_are_400s(exposed: Exposed, body: bytes) -> None:
    response = httpx.post(f"{exposed.url}/v1/audio/speech", content=body, timeout=30,
                          headers={"Authorization": f"Bearer {KEYS[0]}", "Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_a_lone_surrogate_on_the_socket_is_answered(exposed: Exposed) -> None:
    messages, code = _session(exposed, [json.dumps({"text": " "}), '{"text": "Hi \\ud800. "}'])
    assert code == 1008 and "lone surrogate" in messages[-1]["message"]


def test_no_traceback_in_the_log_each_session_logged_and_still_serving(exposed: Exposed) -> None:
    """Runs last in the module: the log of every test above."""
    audio = exposed.api(KEYS[1]).audio.speech.create(model="tts-1", voice="alloy", input="Still here.",
                                                     response_format="pcm")
    assert len(audio.content) > 1000
    log = exposed.log.read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]
    assert "INFO:     session stream-input ok:" in log  # the per-session line, at the default level
