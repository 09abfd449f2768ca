"""Three Triton servers behind one gateway and one ``TTSClient`` (the client library's balancer), on loopback.

One module-scoped fleet serves every test here: the session's ``server`` plus two ``tts-triton serve`` processes
of the same repository, warmed up before ready. As it starts, the first ``serve``'s first requests are timed
(cache off, then first cache hits; Redis is then taken away). Then: 60 streams at concurrency 6 through the
gateway spread over all three, the same through ``TTSClient``, and ``tts-triton loadtest`` over the three; with
the gateway and the client both under load, one server's tritonserver is SIGKILLed (no request started a
second or more after it died fails), and another ``serve`` is sent SIGTERM (it drains: no request fails); the
session's server, the survivor, then takes all further load.
"""

from __future__ import annotations

import concurrent.futures
import csv
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import tritonclient.grpc as grpcclient
from conftest import TritonPorts, pick_ports
from test_cli import tts_triton
from waiting import wait_until

from tts_triton.bench.first_request import first_chunks
from tts_triton.cache.settings import ENV_PREFIX
from tts_triton.client import TTSClient, TTSError
from tts_triton.client.balancer import resolve
from tts_triton.core.contract import TTS
from tts_triton.gateway import GatewayConfig
from tts_triton.gateway.metrics import ENDPOINT_METRICS
from tts_triton.gateway.server import BackgroundGateway
from tts_triton.processes.local_redis import LocalRedis
from tts_triton.processes.triton_server import TritonServer, free_port

TEXT = "Hello there."
FIRST_TEXT, HIT_TEXT = "Is it ready yet?", "Good morning!"
STREAMS, CONCURRENCY = 60, 6
#: Seconds a `serve` gets to drain on SIGTERM (the test's streams take about a second each here).
DRAIN_GRACE_S = 30


@dataclass
class Serve:
    """A ``tts-triton serve`` process of ``repository`` on free loopback ports."""

    repository: Path
    log: Path
    environment: dict[str, str]
    ports: TritonPorts = field(default_factory=pick_ports)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports.grpc}"

    def start(self) -> None:
        p = self.ports
        command = [sys.executable, "-m", "tts_triton.cli", "serve", "--no-build", "--model-repository",
                   str(self.repository), "--http-port", str(p.http), "--grpc-port", str(p.grpc),
                   "--metrics-port", str(p.metrics), "--health-interval", "0",
                   "--drain-grace", str(DRAIN_GRACE_S), "--exit-with-parent"]
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, **self.environment})

    def ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
        return "ready:" in self.log.read_text()

    def triton_pid(self) -> int:
        """The tritonserver child of serve."""
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        (pid,) = [int(c) for c in children if "tritonserver" in Path(f"/proc/{c}/cmdline").read_text()]
        return pid

    def stop(self) -> None:
        """Stop at once: a second signal during serve's drain stops the server without waiting."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass(frozen=True)
class Fleet:
    """gRPC addresses of three servers: the session's (never stopped here: the survivor) and two ``serve``s; and the
    first-chunk seconds of the first ``serve``'s first requests (:func:`first_requests`)."""

    urls: list[str]
    serves: list[Serve]
    first_requests: dict[str, list[float]]


def first_requests(url: str) -> dict[str, list[float]]:
    """First chunk of one text ten times in a row on a server that served nothing but its warm-up, with the cache
    off (the request parameter: every request synthesized); then of another text, stored by one request, ten
    times as hits: its first hit against its tenth."""
    off = first_chunks(url, FIRST_TEXT, 10, cache=False)
    first_chunks(url, HIT_TEXT, 1)  # its audio into Redis
    time.sleep(0.5)  # the write runs after the stream's end
    return {"cache off": off, "cache on, hits": first_chunks(url, HIT_TEXT, 10)}


@pytest.fixture(scope="module")
def fleet(server: TritonServer, model_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The first ``serve`` has a Redis, measured as it starts and then taken away (its cache then misses at once,
    as a failing Redis does): from then on the three servers do the same work for the same text."""
    folder = tmp_path_factory.mktemp("fleet")
    with LocalRedis(folder) as redis:
        extra = [Serve(model_repository, folder / "serve-0.log", {ENV_PREFIX + "REDIS_URL": redis.url}),
                 Serve(model_repository, folder / "serve-1.log", {})]
        try:
            for member in extra:
                member.start()
            wait_until(lambda: all(m.ready() for m in extra), 180, "two more servers ready")
            measured = first_requests(extra[0].grpc_url)
            redis.kill()
            yield Fleet([server.grpc_url, *(m.grpc_url for m in extra)], extra, measured)
        finally:
            for member in extra:
                member.stop()


def served(url: str) -> int:
    """Requests ``tts`` at ``url`` has executed (succeeded or failed) since it started."""
    with grpcclient.InferenceServerClient(url) as client:
        stats = client.get_inference_statistics(TTS).model_stats[0].inference_stats
    return stats.success.count + stats.fail.count


def counts(urls: list[str]) -> list[int]:
    return [served(url) for url in urls]


@pytest.fixture(scope="module")
def gateway_client(fleet: Fleet) -> Iterator[tuple[openai.OpenAI, BackgroundGateway]]:
    with BackgroundGateway(GatewayConfig(triton_endpoints=tuple(fleet.urls)), port=free_port()) as running:
        yield openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0, timeout=120), running


def via_gateway(client: openai.OpenAI) -> None:
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="pcm")
    assert len(audio.content) > 0


def via_client(client: TTSClient) -> None:
    assert client.synthesize(TEXT).audio.size > 0


def spread(urls: list[str], send: Callable[[], None]) -> list[int]:
    """Send STREAMS requests, CONCURRENCY at a time; the requests each server executed meanwhile."""
    before = counts(urls)
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda _: send(), range(STREAMS)))
    return [a - b for a, b in zip(counts(urls), before, strict=True)]


#: Seconds one request may lose to the scheduler of a loaded 2-core host (a CI run saw a 12 ms first hit against
#: 4-5 ms warm ones); a server not warmed up takes ~270 ms for its first hit here (first_request --no-warm-up).
SCHEDULING_SLACK_S = 0.025


def test_a_fresh_servers_first_request_is_within_twice_its_tenth(fleet: Fleet) -> None:
    """Against the tenth, or the median of the warm ones when the tenth was lucky; one sample each, so with the
    slack of a shared host (tts_triton.bench.first_request measures the ratio itself)."""
    slow = {}
    for label, seconds in fleet.first_requests.items():
        warm = max(seconds[-1], float(np.median(seconds[1:])))
        print(f"fresh server, {label}: first chunk of request 1 {seconds[0] * 1000:.1f} ms, 10: "
              f"{seconds[-1] * 1000:.1f} ms, median of 2-10: {np.median(seconds[1:]) * 1000:.1f} ms")
        if seconds[0] > 2 * warm + SCHEDULING_SLACK_S:
            slow[label] = seconds
    assert {label: len(seconds) for label, seconds in fleet.first_requests.items()} == {
        "cache off": 10, "cache on, hits": 10}
    assert slow == {}, slow


#: The fewest streams of the 60 that each server must get. Least outstanding gives a faster server more (on a quiet
#: host 17/19/24 and 18/27/15; beside another worker's tests 11/35/14): the bound tells a spread from a sticky
#: channel (pick_first: 60/0/0), not an even split.
FAIR_SHARE_MIN = STREAMS // 10


def test_the_gateway_spreads_streams_over_three_servers(fleet: Fleet, gateway_client: tuple) -> None:
    client, running = gateway_client
    per_server = spread(fleet.urls, lambda: via_gateway(client))
    print(f"gateway, {STREAMS} streams at concurrency {CONCURRENCY}: {per_server} per server")
    assert sum(per_server) == STREAMS and min(per_server) >= FAIR_SHARE_MIN, per_server
    page = httpx.get(f"{running.url}/metrics").text
    for url in fleet.urls:
        assert f'{ENDPOINT_METRICS["started"]}_total{{endpoint="{url}"}}' in page
        assert f'{ENDPOINT_METRICS["in_flight"]}{{endpoint="{url}"}} 0.0' in page
    assert httpx.get(f"{running.url}/readyz").status_code == 200


def test_the_client_spreads_streams_over_three_servers(fleet: Fleet) -> None:
    with TTSClient(fleet.urls, timeout=60) as client:
        per_server = spread(fleet.urls, lambda: via_client(client))
        started = {s.address: s.started for s in client.balancer.snapshot()}
    print(f"TTSClient, {STREAMS} streams at concurrency {CONCURRENCY}: {per_server} per server")
    assert sum(per_server) == STREAMS and min(per_server) >= FAIR_SHARE_MIN, per_server
    assert [started[url] for url in fleet.urls] == per_server


def test_loadtest_spreads_its_users_over_three_servers(fleet: Fleet, tmp_path: Path) -> None:
    out = tmp_path / "loadtest"
    before = counts(fleet.urls)
    run = tts_triton("loadtest", "--users", str(CONCURRENCY), "--spawn-rate", str(CONCURRENCY), "--duration", "6s",
                     "--stop-timeout", "60", "--url", ",".join(fleet.urls[:2]), "--url", f"grpc://{fleet.urls[2]}",
                     "--out", str(out), timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    per_server = [a - b for a, b in zip(counts(fleet.urls), before, strict=True)]
    with (out / "requests.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    print(f"loadtest, {len(rows)} streams of {CONCURRENCY} users: {per_server} per server")
    assert rows and all(not row["error"] for row in rows)
    # the users share the process's client: its streams in flight, CONCURRENCY at first, spread evenly
    assert sum(per_server) == len(rows) >= CONCURRENCY and min(per_server) >= max(1, len(rows) // 10), per_server


class Load:
    """Requests sent back to back by ``threads`` threads through ``send`` until stopped: (start, error) each."""

    def __init__(self, send: Callable[[], None], threads: int) -> None:
        self.send, self.results = send, []  # type: list[tuple[float, str | None]]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                self.send()
                error = None
            except (TTSError, openai.OpenAIError, AssertionError) as err:
                error = f"{type(err).__name__}: {err}"
            self.results.append((start, error))

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)

    def after(self, moment: float) -> list[tuple[float, str | None]]:
        return [r for r in self.results if r[0] >= moment]


def test_a_killed_server_loses_no_request_started_a_second_later(fleet: Fleet, gateway_client: tuple) -> None:
    doomed = fleet.serves[0]
    with TTSClient(fleet.urls, timeout=60) as client:
        loads = {"gateway": Load(lambda: via_gateway(gateway_client[0]), 3),
                 "client": Load(lambda: via_client(client), 3)}
        time.sleep(2.0)
        subprocess.run(["kill", "-KILL", str(doomed.triton_pid())], check=True)
        died = time.monotonic()
        time.sleep(4.0)
        for load in loads.values():
            load.stop()
    late = {name: load.after(died + 1.0) for name, load in loads.items()}
    for name, load in loads.items():
        early_failures = [r for r in load.results if r[1] and r[0] < died + 1.0]
        print(f"SIGKILL, {name}: {len(load.results)} requests, {len(early_failures)} failed around the kill "
              f"(started < 1 s after it: {[r[1] for r in early_failures]}), {len(late[name])} started >= 1 s after "
              f"it, failed: {[r[1] for r in late[name] if r[1]]}")
    assert {name: len(results) >= 3 for name, results in late.items()} == {"gateway": True, "client": True}, late
    assert {name: [r[1] for r in results if r[1]] for name, results in late.items()} == {"gateway": [], "client": []}


def test_a_draining_server_loses_no_request_and_the_survivor_takes_the_rest(fleet: Fleet,
                                                                             gateway_client: tuple) -> None:
    leaving = fleet.serves[1]
    survivor = fleet.urls[0]
    with TTSClient(fleet.urls, timeout=60) as client:
        loads = {"gateway": Load(lambda: via_gateway(gateway_client[0]), 3),
                 "client": Load(lambda: via_client(client), 3)}
        time.sleep(1.5)
        assert leaving.proc is not None
        leaving.proc.send_signal(signal.SIGTERM)
        leaving.proc.wait(DRAIN_GRACE_S + 15)
        for load in loads.values():
            load.stop()
        assert leaving.proc.returncode == 0, leaving.log.read_text()
        for name, load in loads.items():
            failed = [r[1] for r in load.results if r[1]]
            print(f"SIGTERM (drain), {name}: {len(load.results)} requests, failed: {failed}")
            assert len(load.results) >= 3 and not failed
        before = served(survivor)
        for _ in range(3):
            via_gateway(gateway_client[0])
            via_client(client)
    assert served(survivor) - before == 6
    gateway = gateway_client[1].url
    assert httpx.get(f"{gateway}/readyz").status_code == 200  # one endpoint of three is enough
    page = httpx.get(f"{gateway}/metrics").text
    for url, up in zip(fleet.urls, (1, 0, 0), strict=True):
        assert f'{ENDPOINT_METRICS["usable"]}{{endpoint="{url}"}} {up:.1f}' in page
    ejections = f'{ENDPOINT_METRICS["ejections"]}_total{{endpoint="{fleet.urls[2]}"}} '
    assert float(page.split(ejections, 1)[1].split()[0]) >= 1


def test_a_dns_name_stands_for_each_of_its_addresses(server: TritonServer) -> None:
    """``dns:///localhost:PORT``: every address of the name (127.0.0.1, and ::1 where the resolver gives it, on which
    nothing listens: then ejected, and the request sent again to the other)."""
    port = server.grpc_url.rsplit(":", 1)[1]
    assert f"127.0.0.1:{port}" in resolve(f"localhost:{port}")
    with TTSClient(f"dns:///localhost:{port}", timeout=60) as client:
        for _ in range(3):
            via_client(client)
        assert {s.address for s in client.balancer.snapshot()} == set(resolve(f"localhost:{port}"))
