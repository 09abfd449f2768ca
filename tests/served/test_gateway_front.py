"""The gateway's front door against a real tritonserver: slow heads and bodies cut, a flood of half-open
connections held off, clients leaving at any point counted quietly, and its OpenAPI document fuzzed."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from tts_triton.gateway import GatewayConfig
from tts_triton.gateway.server import BackgroundGateway
from tts_triton.processes.triton_server import TritonServer, free_port

#: The bounds the module's gateway is held to: small, so that the cuts are quick to see.
HEAD_S, BODY_S = 1.0, 1.0
#: ``input``'s limit for the fuzzer: its valid bodies synthesize a few words each, not 4,096 characters.
FUZZ_INPUT_CHARS = 16
#: Linux's socket option (Python 3.11 lacks the name): bind an address now, a port only at connect.
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
ERROR_KEYS = {"message", "type", "param", "code"}


@pytest.fixture(scope="module")
def door(server: TritonServer) -> Iterator[BackgroundGateway]:
    config = GatewayConfig(triton_endpoints=(server.grpc_url,), header_timeout_s=HEAD_S, body_timeout_s=BODY_S,
                           max_input_chars=FUZZ_INPUT_CHARS)
    with BackgroundGateway(config, port=free_port()) as running:
        yield running


def _connect(gateway: BackgroundGateway, n: int | None = None) -> socket.socket:
    """A connection to ``gateway``; the ``n``-th of a flood comes from a loopback address of its own (127.0.x.y), so
    that a flood of thousands needs a free local port or two, however narrow the host's local port range."""
    host, port = gateway.url.removeprefix("http://").split(":")
    if n is None:
        return socket.create_connection((host, int(port)), timeout=10)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)  # the port is picked at connect, per address
    sock.bind((f"127.0.{2 + n // 250 % 250}.{2 + n % 250}", 0))
    sock.connect((host, int(port)))
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection. A server that closes with bytes of ours still
    unread (a trickled piece that crossed its answer) resets the connection: what came before the reset is all."""
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while part := sock.recv(65536):
            data += part
    return data


def _read_response(sock: socket.socket) -> bytes:
    """One response (head and ``content-length`` bytes of body), leaving the connection as the server does."""
    data = b""
    while b"\r\n\r\n" not in data and (part := sock.recv(65536)):
        data += part
    length = re.search(rb"content-length: (\d+)", data.partition(b"\r\n\r\n")[0], re.I)
    while length and len(data.partition(b"\r\n\r\n")[2]) < int(length.group(1)) and (part := sock.recv(65536)):
        data += part
    return data


def _trickle(sock: socket.socket, pieces: list[bytes], every_s: float) -> tuple[float, bytes]:
    """Send ``pieces`` one per ``every_s`` until the server answers or closes; seconds taken and its answer."""
    start = time.perf_counter()
    sock.settimeout(every_s)
    for piece in pieces:
        with contextlib.suppress(TimeoutError):
            if data := sock.recv(65536):
                sock.settimeout(10)
                return time.perf_counter() - start, data + _read_all(sock)
            return time.perf_counter() - start, b""
        with contextlib.suppress(OSError):  # the server may have closed already
            sock.sendall(piece)
    raise AssertionError("the server never cut the slow client")


def _metric(gateway: BackgroundGateway, name: str) -> float:
    text = httpx.get(f"{gateway.url}/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _error_body(response: bytes) -> dict:
    head, _, body = response.partition(b"\r\n\r\n")
    error = json.loads(body)["error"]
    assert set(error) == ERROR_KEYS
    return error


def test_a_slow_head_is_cut_with_408_within_its_bound(door: BackgroundGateway) -> None:
    before = _metric(door, 'tts_gateway_slow_clients_total{part="head"}')
    with _connect(door) as sock:
        sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\n")
        seconds, answer = _trickle(sock, [b"X-Slow: %d\r\n" % i for i in range(40)], every_s=0.2)
    assert HEAD_S - 0.1 < seconds < HEAD_S + 1.0, seconds
    assert answer.startswith(b"HTTP/1.1 408 ") and b"connection: close" in answer
    assert _error_body(answer)["code"] == "request_timeout"
    with _connect(door) as sock:  # a connection that sends nothing is closed silently
        sock.settimeout(HEAD_S + 2)
        assert _read_all(sock) == b""
    assert _metric(door, 'tts_gateway_slow_clients_total{part="head"}') == before + 2


def test_a_slow_body_is_cut_with_408_within_its_bound(door: BackgroundGateway) -> None:
    with _connect(door) as sock:
        sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 200\r\n\r\n{")
        seconds, answer = _trickle(sock, [b" "] * 40, every_s=0.2)
    assert BODY_S - 0.1 < seconds < BODY_S + 1.0, seconds
    assert answer.startswith(b"HTTP/1.1 408 ") and b"connection: close" in answer
    assert _error_body(answer)["code"] == "request_timeout"
    assert _metric(door, 'tts_gateway_slow_clients_total{part="body"}') >= 1
    assert _metric(door, 'tts_gateway_requests_total{format="unknown",outcome="request_timeout"}') >= 1


@contextlib.contextmanager
def _logged() -> Iterator[list[logging.LogRecord]]:
    """Records of uvicorn's and the gateway's loggers (uvicorn's do not reach the root logger)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(n) for n in ("uvicorn", "uvicorn.error", "tts_triton", "starlette")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def test_clients_leaving_during_the_body_or_before_the_audio_are_counted_quietly(door: BackgroundGateway) -> None:
    unknown = 'tts_gateway_requests_total{format="unknown",outcome="disconnected"}'
    pcm = 'tts_gateway_requests_total{format="pcm",outcome="disconnected"}'
    before = _metric(door, unknown), _metric(door, pcm)
    body = json.dumps({"model": "tts-1", "voice": "alloy", "input": "Hello there.", "response_format": "pcm"}).encode()
    with _logged() as records:
        with _connect(door) as sock:  # half of the body, then gone
            sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
                         + body[:10])
            time.sleep(0.2)
        with _connect(door) as sock:  # the whole request, then gone before the audio starts
            sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            time.sleep(0.02)
        deadline = time.monotonic() + 15  # counted once the in-band stop is done: seconds on a loaded machine
        while (_metric(door, unknown), _metric(door, pcm)) != (before[0] + 1, before[1] + 1):
            assert time.monotonic() < deadline, (before, _metric(door, unknown), _metric(door, pcm))
            time.sleep(0.1)
    assert not [r for r in records if r.levelno >= logging.WARNING or r.exc_info], records
    assert _metric(door, "tts_gateway_streams_in_flight") == 0


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_4000_half_open_connections_leave_it_serving_and_connections_over_the_cap_are_refused(
        server: TritonServer) -> None:
    flood, over = 4000, 60
    config = GatewayConfig(triton_endpoints=(server.grpc_url,), header_timeout_s=60.0,
                           max_connections=flood + over // 2)
    with BackgroundGateway(config, port=free_port()) as gateway:
        api = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=60)
        api.audio.speech.create(model="tts-1", voice="alloy", input="Warm up.", response_format="pcm")
        api.close()
        rss = _rss_mib()
        held = []
        try:
            for n in range(flood):  # each holds half a request head
                sock = _connect(gateway, n)
                sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: t\r\n")
                held.append(sock)
            while _metric(gateway, "tts_gateway_connections") < flood:
                time.sleep(0.05)
            api = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=60)
            start = time.perf_counter()
            audio = api.audio.speech.create(model="tts-1", voice="alloy", input="Still here.", response_format="pcm")
            served_s = time.perf_counter() - start
            api.close()
            grown = _rss_mib() - rss
            while _metric(gateway, "tts_gateway_connections") > flood + 1:  # + 1: the metrics request itself
                time.sleep(0.05)
            answers = []
            for _ in range(over):  # complete requests, past the cap for the last half; kept alive when answered
                sock = _connect(gateway)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                held.append(sock)
            for sock in held[flood:]:
                answers.append(_read_response(sock))
        finally:
            for sock in held:
                sock.close()
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
        assert len(audio.content) > 1000 and served_s < 10, served_s
        assert grown < 100, f"{grown:.0f} MiB more for {flood} half-open connections"
        assert len(refused) == over // 2 and all(a.startswith(b"HTTP/1.1 200 ") for a in answers if a not in refused)
        assert all(b"retry-after: 1" in a and _error_body(a)["code"] == "too_many_connections" for a in refused)
        assert _metric(gateway, "tts_gateway_connections_refused_total") == over // 2


def test_a_websocket_over_the_connection_cap_is_refused_too() -> None:
    """uvicorn hands a WebSocket upgrade to the app itself, past the protocol's refusal; the cap holds for it too.
    No Triton behind: the refusal comes before any session."""
    config = GatewayConfig(triton_endpoints=(f"127.0.0.1:{free_port()}",), max_connections=1)
    with BackgroundGateway(config, port=free_port()) as gateway:
        held = _connect(gateway)  # accepted first: the listening socket hands connections over in order
        try:
            held.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: t\r\n")
            url = gateway.url.replace("http", "ws", 1) + "/v1/text-to-speech/alloy/stream-input"
            with pytest.raises(InvalidStatus) as refused:
                ws_connect(url, open_timeout=30).close()
        finally:
            held.close()
    response = refused.value.response
    assert response.status_code == 503 and json.loads(response.body)["error"]["code"] == "too_many_connections"


def test_the_openapi_document_holds_under_fuzzing(door: BackgroundGateway) -> None:
    """schemathesis against the real gateway: valid and invalid bodies for the speech route, valid requests for the
    others; no 5xx (but /readyz's documented 503), no hang, every response as documented (status, media type,
    schema), every 4xx in OpenAI's error shape."""
    schema = schemathesis.openapi.from_url(f"{door.url}/openapi.json")
    operations = {op.label: op for op in (result.ok() for result in schema.get_all_operations())}
    speech = operations.pop("POST /v1/audio/speech")
    cases = st.one_of(speech.as_strategy(GenerationMode.POSITIVE), speech.as_strategy(GenerationMode.NEGATIVE),
                      *(op.as_strategy(GenerationMode.POSITIVE) for op in operations.values()))
    statuses: list[int] = []

    @given(case=cases)
    @settings(max_examples=15, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        response = case.call(timeout=30)
        statuses.append(response.status_code)
        # What the document cannot say: a valid string with nothing to speak is refused, naming input.
        unspeakable = response.status_code == 400 and response.json()["error"]["param"] == "input"
        case.validate_response(response, excluded_checks=[positive_data_acceptance] if unspeakable else [])
        assert response.status_code < 500 or (response.status_code, case.path) == (503, "/readyz")
        if response.status_code >= 400:
            assert set(response.json()["error"]) == ERROR_KEYS

    check()
    assert 200 in statuses and 400 in statuses, statuses
