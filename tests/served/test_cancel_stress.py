"""Streams ended early at random points, many at once, against a real tritonserver: does Triton survive?

Two ways to end a stream early: ``grpc-cancel`` (tritonclient's ``stop_stream(cancel_requests=True)``, the
path Triton 2.51's gRPC frontend can crash on) and ``in-band`` (the client library's stop:
:func:`tts_triton.client.build_stop`, then a normal FINAL). Each worker sends streams one after another and
ends each after a random number of chunks (0: before the first). A server that dies is counted (with its exit
status) and started again. The test runs the project's path for a bounded time; the script compares both::

    python tests/served/test_cancel_stress.py --repository <built repository> --mode grpc-cancel --seconds 120
    python tests/served/test_cancel_stress.py --repository <built repository> --mode in-band --seconds 120

``--rejected N`` sends N 30-minute references (each rejected: the limit is 30 s) one after another and reports
the memory before, after the first and after all (what a rejected request leaves behind); ``--allocator`` and
``--shm-region-mb`` change the server's memory guards (:mod:`tts_triton.processes.memory`) for comparison::

    python tests/served/test_cancel_stress.py --repository <built repository> --rejected 20
    python tests/served/test_cancel_stress.py --repository <built repository> --rejected 20 --allocator glibc \
        --shm-region-mb 0 --triton-arg=--grpc-infer-allocation-pool-size=8    # without the guards

As a script it needs neither pytest nor the nvidia-pytriton wheel where ``$TRITON_HOME`` names a Triton bundle (the
GPU host after ``source scripts/gpu/host-env.sh``: the bundle's server, the repository ``bench.sh`` built)::

    python3 tests/served/test_cancel_stress.py --mode grpc-cancel --seconds 45

``--soak N`` instead sends N whole requests (``--stop-fraction`` of them ended early in-band) and samples the
memory of the server's processes and of its shared memory every ``--sample-s`` seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from tts_triton.client import TTSClient, TTSError
from tts_triton.core import contract
from tts_triton.core.paths import default_model_repository
from tts_triton.processes import memory
from tts_triton.processes.embedded import embedded_server, triton_home
from tts_triton.processes.triton_server import SHM_DIR, TritonServer

try:
    import pytest

    slow = pytest.mark.slow
except ImportError:  # run as a script where pytest is not installed (the GPU host's bundle)
    def slow(test):  # noqa: ANN001, ANN201
        return test

MODES = ("grpc-cancel", "in-band")
#: Many sentences: the test checkpoint's stop gate ends each one after a few decoder steps.
TEXT = " ".join(["This sentence keeps the decoder busy for a while."] * 12)
#: Most chunks a stream gets before it is ended (chosen uniformly from 0 up to this).
MAX_CHUNKS = 4


@dataclass
class StressReport:
    mode: str
    seconds: float = 0.0
    streams: int = 0
    ended_early: int = 0
    failed: int = 0
    crashes: list[int | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: ``tts_requests_total`` of ``tts`` by outcome at the end (since the last restart).
    outcomes: dict[str, float] = field(default_factory=dict)


def outcome_counts(server: TritonServer) -> dict[str, float]:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as page:
        text = page.read().decode()
    found = re.findall(r'^tts_requests_total\{model="tts",outcome="(\w+)"\} (\S+)$', text, re.M)
    return {outcome: float(value) for outcome, value in found}


def cancelled_stream(url: str, chunks: int, timeout: float) -> None:
    """A raw tritonclient stream cancelled with ``stop_stream(cancel_requests=True)`` after ``chunks`` chunks."""
    got = threading.Semaphore(0)
    client = grpcclient.InferenceServerClient(url)
    text = grpcclient.InferInput(contract.TEXT, [1], "BYTES")
    text.set_data_from_numpy(np.array([TEXT.encode()], dtype=np.object_))
    try:
        client.start_stream(lambda result, error: got.release(), stream_timeout=timeout)
        client.async_stream_infer(contract.TTS, [text], enable_empty_final_response=True)
        for _ in range(chunks):
            if not got.acquire(timeout=timeout):
                raise TimeoutError("no response")
        client.stop_stream(cancel_requests=True)
    finally:
        client.close()


def stopped_stream(client: TTSClient, chunks: int) -> None:
    """The client library's stream of :data:`TEXT`, closed after ``chunks`` chunks (its in-band stop)."""
    with contextlib.closing(client.stream(TEXT)) as stream:
        for _ in range(chunks):
            if next(stream, None) is None:
                break


def run_stress(server: TritonServer, mode: str, *, workers: int = 16, seconds: float = 60.0,
               max_streams: int = 100_000, seed: int = 0) -> StressReport:
    """Streams ended at random points from ``workers`` threads for ``seconds`` (or ``max_streams``); a crashed
    server is restarted and counted."""
    report = StressReport(mode)
    lock = threading.Lock()
    end_at = time.monotonic() + seconds
    healthy = threading.Event()
    healthy.set()

    def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        with TTSClient(server.grpc_url, timeout=60, retries=0) as client:
            while time.monotonic() < end_at:
                healthy.wait(120)
                with lock:
                    if report.streams >= max_streams:
                        return
                    report.streams += 1
                chunks = rng.randint(0, MAX_CHUNKS)
                try:
                    if mode == "grpc-cancel":
                        cancelled_stream(server.grpc_url, chunks, 60)
                    else:
                        stopped_stream(client, chunks)
                    with lock:
                        report.ended_early += 1
                except (TTSError, Exception) as err:  # counted; the run goes on
                    with lock:
                        report.failed += 1
                        if len(report.errors) < 20:
                            report.errors.append(f"{type(err).__name__}: {err}"[:200])

    def watchdog() -> None:
        nonlocal end_at
        while time.monotonic() < end_at:
            time.sleep(0.2)
            if not server.is_running():
                healthy.clear()
                code = server.stop()
                with lock:
                    report.crashes.append(code)
                try:
                    server.start()
                except Exception as err:  # the run ends here, its report says why
                    with lock:
                        report.errors.append(f"restart failed: {type(err).__name__}: {err}"[:2000])
                    end_at = time.monotonic()
                healthy.set()

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    dog = threading.Thread(target=watchdog, daemon=True)
    for t in (*threads, dog):
        t.start()
    for t in threads:
        t.join(seconds + 180)
    dog.join(5)
    report.seconds = round(time.monotonic() - started, 1)
    time.sleep(1)  # the last stopped streams are counted when their coroutines end
    if server.is_running():
        report.outcomes = outcome_counts(server)
    return report


@slow
def test_in_band_stops_at_random_points_never_crash_the_server(model_repository: Path, start_triton) -> None:
    server = start_triton(model_repository)
    report = run_stress(server, "in-band", workers=8, seconds=20)
    print(json.dumps(asdict(report)))
    assert report.crashes == [] and report.failed == 0, report
    assert report.streams >= 20, f"too few streams to say anything: {report}"
    assert report.outcomes.get("stopped", 0) >= report.streams / 2, "most streams should end by their stop"
    with TTSClient(server.grpc_url, timeout=60) as client:
        assert client.synthesize("Still here.").audio.size > 0


SOAK_TEXTS = ("Hello there, this is a short test.", "The weather is fine today. Let us go for a walk.",
              "One more request, spoken while others run.")


def memory_mib(server: TritonServer) -> dict[str, float]:
    """RSS of tritonserver, of its stubs (its child processes) and of the ``tts`` stub among them, and the bytes of
    its shared-memory regions, MiB."""
    def rss(pid: int) -> float:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    children, tts = [], 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == server.pid:
                children.append(pid := int(stat.parent.name))
                if f" {contract.TTS}_0_0 ".encode() in (stat.parent / "cmdline").read_bytes().replace(b"\0", b" "):
                    tts = rss(pid)
    shm = sum(p.stat().st_blocks * 512 for p in SHM_DIR.glob(f"{server.shm_prefix}*"))
    return {"server": round(rss(server.pid), 1), "stubs": round(sum(rss(c) for c in children), 1),
            "tts_stub": round(tts, 1), "shm": round(shm / 2**20, 1)}


def soak(server: TritonServer, requests: int, *, workers: int = 8, stop_fraction: float = 0.1,
         sample_s: float = 10.0, seed: int = 0) -> dict:
    """``requests`` whole requests from ``workers`` threads, ``stop_fraction`` of them stopped after their first
    chunk; failures, crashes and memory samples (seconds, requests done, memory_mib)."""
    done = {"completed": 0, "stopped": 0, "failed": 0}
    errors: list[str] = []
    samples: list[tuple[float, int, dict[str, float]]] = []
    lock = threading.Lock()
    issued = iter(range(requests))
    start = time.monotonic()

    def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        with TTSClient(server.grpc_url, timeout=120) as client:
            while True:
                with lock:
                    if next(issued, None) is None:
                        return
                text, stop = rng.choice(SOAK_TEXTS), rng.random() < stop_fraction
                try:
                    if stop:  # a longer text, so that the stop comes while it is being spoken
                        stopped_stream(client, 1)
                    else:
                        client.synthesize(text)
                    key = "stopped" if stop else "completed"
                except Exception as err:  # counted; the soak goes on
                    key = "failed"
                    with lock:
                        errors.append(f"{type(err).__name__}: {err}"[:200])
                with lock:
                    done[key] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        samples.append((round(time.monotonic() - start, 1), sum(done.values()), memory_mib(server)))
        for t in threads:
            t.join(sample_s / len(threads))
    samples.append((round(time.monotonic() - start, 1), sum(done.values()), memory_mib(server)))
    return {"requests": requests, **done, "crashed": not server.is_running(), "errors": errors[:20],
            "seconds": round(time.monotonic() - start, 1), "memory_mib": samples}


def rejected_references(server: TritonServer, count: int, minutes: float = 30.0) -> dict:
    """``count`` requests whose reference is ``minutes`` long (rejected as too long); memory before, after the first,
    after all (:func:`memory_mib`), and the rejection messages seen."""
    rate = 16_000
    reference = np.zeros(int(minutes * 60 * rate), np.float32)
    samples, messages = [("before", memory_mib(server))], set()
    start = time.monotonic()
    with TTSClient(server.grpc_url, timeout=120, retries=0) as client:
        for i in range(count):
            try:
                client.synthesize("Hi.", reference_audio=reference, reference_sample_rate=rate)
                messages.add("accepted!")
            except TTSError as err:
                messages.add(str(err)[:120])
            if i == 0:
                samples.append(("after 1", memory_mib(server)))
    seconds = round(time.monotonic() - start, 1)
    time.sleep(2)  # the allocator hands freed pages back within a second (tts_triton.processes.memory.ALLOCATORS)
    samples.append((f"after {count}", memory_mib(server)))
    return {"reference_mb": round(reference.nbytes / 1e6, 1), "seconds": seconds, "memory_mib": samples,
            "messages": sorted(messages)}


#: Rejected 30-minute references the test sends, as the documented measurement does
#: (docs/records/bench/rejected-requests.md).
REJECTED = 20
#: The most a process or the shared memory may keep of all those requests, MiB (about 1 GB was sent).
KEPT_MIB = 50


def test_rejected_long_references_leave_no_memory_behind(model_repository: Path, make_triton) -> None:
    server = make_triton(model_repository)
    server.start()
    result = rejected_references(server, REJECTED)
    print(json.dumps(result))
    (_, before), *_, (_, after) = result["memory_mib"]
    kept = {key: round(after[key] - before[key], 1) for key in ("server", "tts_stub", "shm")}
    assert max(kept.values()) < KEPT_MIB, f"kept after {REJECTED} rejected references (MiB): {kept}; {result}"
    assert "accepted!" not in result["messages"], result
    with TTSClient(server.grpc_url, timeout=60, retries=0) as client:  # a reference within the limits still works
        reference = np.zeros(5 * 16_000, np.float32)
        assert client.synthesize("Still here.", reference_audio=reference, reference_sample_rate=16_000).audio.size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repository", type=Path, default=default_model_repository(),
                        help="a built model repository (default %(default)s: what serve and bench build)")
    parser.add_argument("--mode", choices=MODES, default="in-band")
    parser.add_argument("--soak", type=int, metavar="N", help="N whole requests instead, with memory samples")
    parser.add_argument("--rejected", type=int, metavar="N", help="N rejected 30-minute references instead")
    parser.add_argument("--stop-fraction", type=float, default=0.1)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--triton-arg", action="append", default=[], help="extra tritonserver argument; repeatable")
    parser.add_argument("--allocator", choices=[*memory.ALLOCATORS, memory.GLIBC],
                        help=f"tritonserver's allocator (default: ${memory.ALLOCATOR_ENV}, "
                        f"else {memory.DEFAULT_ALLOCATOR})")
    parser.add_argument("--shm-region-mb", type=int, help="cap on each Python-backend shared-memory region, MiB "
                        f"(0: none; default: ${memory.SHM_LIMIT_ENV}, else {memory.SHM_REGION_LIMIT_MB})")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    server: TritonServer | None = None
    try:  # whatever happens, the result is printed: a run on a remote host may bring nothing else back
        # an embedded server: with a bundle, its LD_LIBRARY_PATH leaves out the interpreter's LIBDIR, whose system
        # cuDNN would shadow PyTorch's on the GPU host (tts_triton.processes.embedded)
        server = embedded_server(args.repository, triton_home(), extra_args=args.triton_arg,
                                 allocator=args.allocator, shm_region_limit_mb=args.shm_region_mb)
        server.start()
        if args.rejected:
            result = rejected_references(server, args.rejected)
        elif args.soak:
            result = soak(server, args.soak, workers=args.workers, stop_fraction=args.stop_fraction,
                          sample_s=args.sample_s)
        else:
            result = asdict(run_stress(server, args.mode, workers=args.workers, seconds=args.seconds))
    except Exception as err:
        result = {"error": f"{type(err).__name__}: {err}"}
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(result, indent=1))
    return 1 if "error" in result or result.get("crashes") or result.get("crashed") else 0


if __name__ == "__main__":
    sys.exit(main())
