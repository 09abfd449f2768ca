"""``tts-triton bench-gateway``: what the gateway costs over direct gRPC, measured side by side in one run.

    tts-triton bench-gateway --out runs/gateway                       # embedded server, CPU
    tts-triton bench-gateway --target torch-cuda --soak 1000 --out runs/gateway-h200

Starts Triton (or uses ``--url``) and gateway processes in front of it (as many as the largest of ``--gateways``),
then measures, interleaved so that both paths see the same server state: at C=1, the gateway's first audio byte
(``pcm`` and ``mp3``) against the first chunk of a direct gRPC stream (:class:`~tts_triton.client.AsyncTTSClient`);
at each of ``--streams`` concurrent streams, audio seconds delivered per wall second directly and through each of
``--gateways`` gateway processes (the streams spread over them in turn: replicas behind a balancer), so that a
report says how many gateway processes a server needs. With ``--soak N``, N more requests through the first gateway
with its resident memory sampled. Prints a table; writes ``report.md``, ``report.json`` and ``report.png`` under
``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import psutil

from tts_triton.bench.workload import SENTENCES as WORKLOAD_SENTENCES
from tts_triton.client import AsyncTTSClient
from tts_triton.core.paths import default_model_repository
from tts_triton.export.targets import AUTO, DEFAULT_TARGET, embedded_targets
from tts_triton.gateway.encoders import OUTPUT_RATE, available_formats
from tts_triton.jobs.progress import ProgressLine
from tts_triton.processes.embedded import triton_home
from tts_triton.processes.triton_server import free_port, set_parent_death_signal

#: The texts of ``tts-triton bench``'s request mix, cycled in the same order.
SENTENCES = tuple(text for _, text in WORKLOAD_SENTENCES)


@dataclass
class Measured:
    """One way to reach the model and what was measured on it at C=1."""

    name: str
    first_byte_s: list[float] = field(default_factory=list)
    failures: int = 0


@dataclass
class Throughput:
    """Audio seconds per wall second at ``streams`` concurrent streams, directly (``gateways`` 0) or spread over
    ``gateways`` gateway processes (pcm), with the failed requests."""

    streams: int
    gateways: int
    audio_per_s: float
    failures: int


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


async def _direct(client: AsyncTTSClient, text: str) -> tuple[float, float]:
    """(seconds to the first chunk, seconds of audio) of one direct gRPC stream."""
    start, first, audio = time.perf_counter(), None, 0.0
    async for chunk in client.stream(text):
        first = first if first is not None else time.perf_counter() - start
        audio += chunk.audio.size / chunk.sample_rate
    return first or 0.0, audio


async def _gateway(http: httpx.AsyncClient, text: str, fmt: str) -> tuple[float, float]:
    """(seconds to the first body byte, seconds of audio; pcm only) of one gateway request."""
    start, first, size = time.perf_counter(), None, 0
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": fmt}
    async with http.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        async for part in response.aiter_bytes():
            if part and first is None:
                first = time.perf_counter() - start
            size += len(part)
    return first or 0.0, size / 2 / OUTPUT_RATE if fmt == "pcm" else 0.0


async def _closed_loop(streams: int, requests: int, one: Callable[[str], Awaitable[tuple[float, float]]]) -> tuple[
        float, int]:
    """Audio seconds per wall second with ``streams`` workers sharing ``requests`` requests, and failures."""
    queue = list(range(requests))
    audio, failures = 0.0, 0

    async def worker() -> None:
        nonlocal audio, failures
        while queue:
            i = queue.pop()
            try:
                audio += (await one(SENTENCES[i % len(SENTENCES)]))[1]
            except Exception:  # counted: the run reports failures, it does not stop at one
                failures += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(streams)))
    return audio / (time.perf_counter() - start), failures


async def _measure(args: argparse.Namespace, triton_url: str, gateways: list[tuple[str, int]]) -> dict:
    client = AsyncTTSClient(triton_url, timeout=120)
    most = max(args.streams)
    limits = httpx.Limits(max_connections=most * 2, max_keepalive_connections=most * 2)
    async with contextlib.AsyncExitStack() as stack:
        https = [await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=120, limits=limits))
                 for url, _ in gateways]
        http = https[0]
        paths = {"grpc": Measured("direct gRPC (first chunk)"), "pcm": Measured("gateway pcm (first byte)"),
                 "mp3": Measured("gateway mp3 (first byte)")}
        calls = {"grpc": lambda t: _direct(client, t), "pcm": lambda t: _gateway(http, t, "pcm"),
                 "mp3": lambda t: _gateway(http, t, "mp3")}
        for name in paths:  # warm-up: connections, the server's first-call costs
            await calls[name](SENTENCES[0])
        for i in range(args.requests):  # C=1, the paths interleaved request by request
            for name, path in paths.items():
                path.first_byte_s.append((await calls[name](SENTENCES[i % len(SENTENCES)]))[0])
        throughput = []
        for streams in args.streams:
            rate, failures = await _closed_loop(streams, args.stream_requests, calls["grpc"])
            throughput.append(Throughput(streams, 0, rate, failures))
            for count in args.gateways:
                turn = itertools.cycle(https[:count])  # the streams' requests spread over the gateways in turn
                rate, failures = await _closed_loop(
                    streams, args.stream_requests, lambda t, turn=turn: _gateway(next(turn), t, "pcm"))
                throughput.append(Throughput(streams, count, rate, failures))
        soak = await _soak(args, http, gateways[0][1]) if args.soak else None
    await client.close()
    return {"paths": {k: asdict(v) for k, v in paths.items()}, "throughput": [asdict(t) for t in throughput],
            "soak": soak}


async def _soak(args: argparse.Namespace, http: httpx.AsyncClient, pid: int) -> dict:
    """``--soak`` requests at ``--soak-concurrency`` through the gateway, its RSS sampled once a second."""
    process, rss, failures, done = psutil.Process(pid), [], 0, 0
    causes: collections.Counter[str] = collections.Counter()  # "format: error type" of each failure
    formats = available_formats()  # every format the gateway serves, in turn
    progress = ProgressLine("soak", args.soak)
    start = time.perf_counter()

    async def sample() -> None:
        while True:
            rss.append((time.perf_counter() - start, process.memory_info().rss / 2**20))
            await asyncio.sleep(1.0)

    async def worker(indices: list[int]) -> None:
        nonlocal failures, done
        while indices:
            i = indices.pop()
            try:
                await _gateway(http, SENTENCES[i % len(SENTENCES)], formats[i % len(formats)])
            except Exception as err:  # counted, by format and cause
                failures += 1
                causes[f"{formats[i % len(formats)]}: {type(err).__name__}"] += 1
            done += 1
            progress.advance(detail=f"{failures} failures, gateway RSS {rss[-1][1] if rss else 0:.0f} MiB")

    sampler = asyncio.create_task(sample())
    indices = list(range(args.soak))
    await asyncio.gather(*(worker(indices) for _ in range(args.soak_concurrency)))
    sampler.cancel()
    progress.close()
    rss.append((time.perf_counter() - start, process.memory_info().rss / 2**20))
    tenth = rss[max(1, len(rss) // 10)][1]
    return {"requests": done, "failures": failures, "failure_causes": dict(causes), "formats": list(formats),
            "seconds": time.perf_counter() - start, "rss_mib": rss,
            "rss_after_first_tenth_mib": tenth, "rss_end_mib": rss[-1][1], "rss_peak_mib": max(r for _, r in rss)}


@contextlib.contextmanager
def _triton(args: argparse.Namespace) -> Iterator[str]:
    """``--url``, or the embedded server ``tts-triton bench`` starts (same target choice and build)."""
    from tts_triton.bench.sweep import _server
    from tts_triton.bench.sweep import parser as bench_parser

    # The bench's own defaults for every server option this command does not take, ours over them.
    options = argparse.Namespace(**{**vars(bench_parser().parse_args([])), **vars(args)})
    with _server(options, print) as server:
        yield server.url


@contextlib.contextmanager
def _gateway_processes(triton_url: str, count: int, streams: int) -> Iterator[list[tuple[str, int]]]:
    """``count`` gateway processes (:func:`_gateway_process`), each allowed ``streams`` streams: (url, pid) each."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(_gateway_process(triton_url, streams)) for _ in range(count)]


@contextlib.contextmanager
def _gateway_process(triton_url: str, streams: int) -> Iterator[tuple[str, int]]:
    """``tts-triton gateway`` in a process of its own (its CPU and memory apart from the load generator)."""
    port = free_port()
    command = [sys.executable, "-m", "tts_triton.cli", "gateway", "--port", str(port), "--triton-url", triton_url,
               "--max-streams", str(max(64, streams * 4)), "--log-level", "warning"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,  # and stopped if this process dies first
                            preexec_fn=functools.partial(set_parent_death_signal, signal.SIGTERM, os.getpid()))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not become ready (exit code {proc.poll()})")
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _table(result: dict, args: argparse.Namespace) -> str:
    rows = ["| path | C=1 first byte p50 ms | p90 ms | failures |", "|---|---|---|---|"]
    for path in result["paths"].values():
        values = path["first_byte_s"]
        rows.append(f"| {path['name']} | {statistics.median(values) * 1000:.1f} | "
                    f"{_percentile(values, 90) * 1000:.1f} | {path['failures']} |")
    grpc, pcm = result["paths"]["grpc"], result["paths"]["pcm"]
    overhead = (statistics.median(pcm["first_byte_s"]) - statistics.median(grpc["first_byte_s"])) * 1000
    rows.append(f"\nGateway over direct gRPC: first byte {overhead:+.1f} ms (p50, pcm).\n")
    rows += ["| streams | direct gRPC audio s per s | "
             + " | ".join(f"{n} gateway process{'es' if n > 1 else ''} (pcm)" for n in args.gateways) + " |",
             "|---:|---:|" + "---:|" * len(args.gateways)]
    for streams in args.streams:
        measured = {t["gateways"]: t for t in result["throughput"] if t["streams"] == streams}
        direct = measured[0]["audio_per_s"]

        def cell(t: dict, direct: float = direct) -> str:
            ratio = t["audio_per_s"] / direct if direct else float("nan")
            failed = f", {t['failures']} failed" if t["failures"] else ""
            return f"{t['audio_per_s']:,.1f} (x{ratio:.2f}{failed})"

        failed = f" ({measured[0]['failures']} failed)" if measured[0]["failures"] else ""
        rows.append(f"| {streams} | {direct:,.1f}{failed} | " + " | ".join(cell(measured[n]) for n in args.gateways)
                    + " |")
    if soak := result["soak"]:
        rows.append(f"\nSoak: {soak['requests']} requests at C={args.soak_concurrency}, {soak['failures']} failures, "
                    f"{soak['seconds']:.0f} s; gateway RSS {soak['rss_after_first_tenth_mib']:.0f} MiB after the "
                    f"first tenth, {soak['rss_end_mib']:.0f} MiB at the end, peak {soak['rss_peak_mib']:.0f} MiB; "
                    f"formats {', '.join(soak['formats'])}.")
        rows.extend(f"- failed: {count} x {cause}" for cause, count in sorted(soak["failure_causes"].items()))
    return "\n".join(rows)


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    soak = result["soak"]
    fig, axes = plt.subplots(1, 3 if soak else 2, figsize=(15 if soak else 10, 4))
    names = [p["name"] for p in result["paths"].values()]
    axes[0].boxplot([[v * 1000 for v in p["first_byte_s"]] for p in result["paths"].values()])
    axes[0].set_xticks(range(1, len(names) + 1), [n.replace(" (", "\n(") for n in names], fontsize=8)
    axes[0].set_ylabel("ms to first audio (C=1)")
    counts = sorted({t["gateways"] for t in result["throughput"]})
    levels = sorted({t["streams"] for t in result["throughput"]})
    width = 0.8 / len(counts)
    for i, count in enumerate(counts):
        rates = {t["streams"]: t["audio_per_s"] for t in result["throughput"] if t["gateways"] == count}
        axes[1].bar([j + i * width for j in range(len(levels))], [rates[s] for s in levels], width,
                    label="direct gRPC" if count == 0 else f"{count} gateway(s), pcm")
    axes[1].set_xticks([j + 0.4 - width / 2 for j in range(len(levels))], [f"{s} streams" for s in levels])
    axes[1].set_ylabel("audio seconds per second")
    axes[1].legend(fontsize=8)
    if soak:
        axes[2].plot([t for t, _ in soak["rss_mib"]], [r for _, r in soak["rss_mib"]])
        axes[2].set_xlabel("seconds")
        axes[2].set_ylabel("gateway RSS MiB")
        axes[2].set_title(f"soak: {soak['requests']} requests, {soak['failures']} failures")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tts-triton bench-gateway", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", action="append", metavar="ENDPOINT",
                   help="gRPC address of a running server, as for `tts-triton bench` (repeat it for several; "
                        "default: start the embedded server)")
    p.add_argument("--model-repository", type=Path, default=default_model_repository(),
                   help="repository the embedded server serves, built if needed (default %(default)s)")
    p.add_argument("--target", default=DEFAULT_TARGET, choices=[AUTO, *embedded_targets()],
                   help="runtime target to build it for, as for `tts-triton bench` (default %(default)s)")
    p.add_argument("--triton-home", type=Path, default=triton_home(),
                   help="an unpacked Triton bundle to run instead of nvidia-pytriton's (default: $TRITON_HOME)")
    p.add_argument("--requests", type=int, default=20, help="C=1 requests per path (default %(default)s)")
    p.add_argument("--streams", type=int, nargs="+", default=[16],
                   help="concurrent streams for throughput, one level each (default %(default)s)")
    p.add_argument("--stream-requests", type=int, default=64,
                   help="requests per path at each --streams level (default %(default)s)")
    p.add_argument("--gateways", type=int, nargs="+", default=[1],
                   help="gateway processes the throughput levels spread their streams over, each count measured "
                        "(default %(default)s; the C=1 latency and the soak use the first process)")
    p.add_argument("--soak", type=int, default=0, metavar="N", help="N more requests through the gateway (default 0)")
    p.add_argument("--soak-concurrency", type=int, default=8, help="concurrency of the soak (default %(default)s)")
    p.add_argument("--out", type=Path, required=True, help="folder for report.md, report.json, report.png")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``tts-triton bench-gateway``; returns the exit status (1 if any request failed)."""
    p = parser()
    args = p.parse_args(argv)
    if min(args.streams) < 1 or min(args.gateways) < 1:
        p.error("--streams and --gateways must be at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    with _triton(args) as triton_url, _gateway_processes(triton_url, max(args.gateways),
                                                          max(args.streams)) as gateways:
        print(f"triton {triton_url}, gateways {', '.join(url for url, _ in gateways)}: measuring ...", flush=True)
        result = asyncio.run(_measure(args, triton_url, gateways))
    result["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    table = _table(result, args)
    print(table)
    command = "tts-triton bench-gateway " + " ".join(argv if argv is not None else sys.argv[2:])
    (args.out / "report.md").write_text(f"# Gateway overhead\n\n`{command}`\n\n{table}\n\n![](report.png)\n")
    (args.out / "report.json").write_text(json.dumps(result, indent=1))
    _plot(result, args.out / "report.png")
    failures = (sum(p["failures"] for p in result["paths"].values()) + sum(t["failures"] for t in result["throughput"])
                + (result["soak"] or {}).get("failures", 0))
    return 1 if failures else 0
