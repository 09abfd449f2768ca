"""A dead ``tts`` stub on a real tritonserver: its streams end with the client library's stall error (Triton
sends them nothing more), and ``tts_active_requests`` is back to 0 once the model is reloaded (Triton 2.51's
Python backend does not restart a dead stub by itself: "Stub process 'tts_0_0' is not healthy" until then)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
from conftest import stub_pid
from waiting import wait_until

from tts_triton.client import ServerUnavailableError, TTSClient, TTSError, TTSTimeoutError
from tts_triton.core import contract
from tts_triton.processes.triton_server import TritonServer

LONG_TEXT = " ".join(["This sentence keeps the decoder busy for quite a while."] * 40)
#: The client's stall timeout in this test; the stream must fail within it plus the in-band stop's wait.
STALL_S = 3.0


def active_requests(server: TritonServer) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as page:
        text = page.read().decode()
    return sum(float(v) for v in re.findall(r'^tts_active_requests\{[^}]*model="tts"[^}]*\} (\S+)$', text, re.M))


@pytest.mark.slow
def test_dead_tts_stub_ends_its_streams_and_the_gauge_recovers(model_repository: Path, make_triton) -> None:
    server = make_triton(model_repository, extra_args=["--model-control-mode=explicit", "--load-model=*"])
    server.start()
    errors: list[BaseException] = []
    started = threading.Barrier(3)

    def listen() -> None:
        with TTSClient(server.grpc_url, stall_timeout=STALL_S, retries=0) as client:
            try:
                for i, _ in enumerate(client.stream(LONG_TEXT)):
                    if i == 0:
                        started.wait(60)
            except TTSError as err:
                errors.append(err)

    threads = [threading.Thread(target=listen) for _ in range(2)]
    for t in threads:
        t.start()
    started.wait(120)
    wait_until(lambda: active_requests(server) == 2, 10, "the gauge at two streams")  # sent within half a second
    killed_at = time.monotonic()
    os.kill(stub_pid(server, contract.TTS), signal.SIGKILL)
    for t in threads:
        t.join(60)
    ended_after = time.monotonic() - killed_at
    # the stall bound ends them, or Triton closes their streams first (a clean-clone run saw UNAVAILABLE, "Stream
    # removed"): either way each stream ends with a clear error, promptly
    assert len(errors) == 2 and all(isinstance(e, TTSTimeoutError | ServerUnavailableError) for e in errors), errors
    assert ended_after < STALL_S + 15, f"the streams ended {ended_after:.1f} s after the kill"

    with grpcclient.InferenceServerClient(server.grpc_url) as control:  # what the health check's healing does
        control.unload_model(contract.TTS, headers=server.admin_headers(grpc=True))
        deadline = time.monotonic() + 60
        while control.is_model_ready(contract.TTS):
            assert time.monotonic() < deadline, "tts did not unload"
            time.sleep(0.2)
        control.load_model(contract.TTS, headers=server.admin_headers(grpc=True))
    with TTSClient(server.grpc_url, timeout=60) as client:
        assert client.synthesize("Back again.").audio.size > 0
    assert active_requests(server) == 0, "tts_active_requests kept the dead stub's requests"
