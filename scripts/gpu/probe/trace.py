"""Where a first chunk's time goes, hop by hop: one ``tts`` stream at a time against the embedded server with
Triton's request tracing on, the client's send and first-chunk times on the same clock as the trace's timestamps
(CLOCK_MONOTONIC), median and p90 per hop over the measured streams; then, from Triton's statistics over the same
streams, each network call's time in Triton (queue, compute), and the BLS's own share of its time to the first
chunk (G2P, building the calls, taking the responses: what is left after the first text encoder, decoder and
vocoder call). Triton 2.51 cannot trace the BLS calls themselves: a call given the decoupled request's trace
crashes the server (the trace is released with the request, before the calls are made).

    python3 scripts/gpu/probe/trace.py [--target T] [--model-repository DIR] [--triton-home DIR] [--mps]
                                       [--warmup N] [--requests N]
"""

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import tritonclient.grpc as grpcclient

from tts_triton.bench.workload import SENTENCES
from tts_triton.client import AsyncTTSClient
from tts_triton.core.config import STREAMING
from tts_triton.export.build import ensure_repository
from tts_triton.processes.embedded import embedded_server, triton_home
from tts_triton.text import text_to_sequences

NETWORKS = ("text_encoder", "decoder", "vocoder")
#: (hop, trace timestamp it starts at, timestamp it ends at); "sent" and "received" are the client's.
HOPS = (("client -> server (gRPC read)", "sent", "GRPC_WAITREAD_END"),
        ("frontend: the request built", "GRPC_WAITREAD_END", "REQUEST_START"),
        ("tts: queue and hand-over to execute", "REQUEST_START", "COMPUTE_START"),
        ("BLS: execute to the first chunk sent", "COMPUTE_START", "GRPC_SEND_START"),
        ("gRPC: the first chunk written", "GRPC_SEND_START", "GRPC_SEND_END"),
        ("server -> client (the chunk in hand)", "GRPC_SEND_END", "received"))


def read_traces(path: Path) -> list[dict[str, int]]:
    """The ``tts`` traces in order of arrival, each as {timestamp name: ns}, the first of each name (Triton writes
    one entry per timestamp; GRPC_SEND_* recur per response, and the first is the first chunk's)."""
    traces: dict[int, dict[str, Any]] = defaultdict(dict)
    for entry in json.loads(path.read_text()):
        trace = traces[entry["id"]]
        if "model_name" in entry:
            trace["model"] = entry["model_name"]
        for stamp in entry.get("timestamps", ()):
            trace.setdefault(stamp["name"], stamp["ns"])
    tts = [t for t in traces.values() if t.pop("model", None) == "tts"]
    return sorted(tts, key=lambda t: t["REQUEST_START"])


def call_times(client: grpcclient.InferenceServerClient) -> dict[str, tuple[int, int, int, int]]:
    """Per network: (calls, request ns, queue ns, compute ns) so far, from Triton's statistics."""
    out = {}
    for name in NETWORKS:
        stats = client.get_inference_statistics(name, as_json=True)["model_stats"][0]["inference_stats"]
        ns = {key: int(stats[key].get("ns", 0)) for key in ("success", "queue", "compute_input", "compute_infer",
                                                             "compute_output")}
        out[name] = (int(stats["success"].get("count", 0)), ns["success"], ns["queue"],
                     ns["compute_input"] + ns["compute_infer"] + ns["compute_output"])
    return out


def _row(label: str, values: list[float]) -> str:
    values = sorted(values)
    return f"| {label} | {statistics.median(values):.2f} | {values[int(0.9 * (len(values) - 1))]:.2f} |"


async def stream_all(url: str, count: int) -> list[tuple[int, int]]:
    """(send, first chunk) in monotonic ns for ``count`` streams, one at a time, cycling the bench's sentences."""
    times = []
    async with AsyncTTSClient(url) as client:
        for i in range(count):
            sent, first = time.monotonic_ns(), None
            async for _ in client.stream(SENTENCES[i % len(SENTENCES)][1]):
                first = first or time.monotonic_ns()
            times.append((sent, first))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="onnxruntime-python", help="runtime target (default %(default)s)")
    parser.add_argument("--model-repository", type=Path, default=Path(tempfile.gettempdir()) / "trace-repo",
                        help="repository to build and serve (default: trace-repo in the temporary folder)")
    parser.add_argument("--triton-home", type=Path, default=triton_home(),
                        help="a Triton bundle (GPU host; default: $TRITON_HOME if set, else nvidia-pytriton's)")
    parser.add_argument("--mps", action="store_true", help="run the server under an MPS daemon of its own")
    parser.add_argument("--warmup", type=int, default=12, help="unmeasured streams first (default %(default)s)")
    parser.add_argument("--requests", type=int, default=60, help="measured streams (default %(default)s)")
    args = parser.parse_args(argv)
    repository = ensure_repository(args.model_repository, target=args.target)
    with tempfile.TemporaryDirectory() as tmp:
        trace_file = Path(tmp) / "trace.json"
        trace_args = [f"--trace-config=triton,file={trace_file}", "--trace-config=triton,log-frequency=0",
                      "--trace-config=rate=1", "--trace-config=count=-1", "--trace-config=level=TIMESTAMPS"]
        server = embedded_server(repository, args.triton_home, mps=args.mps, extra_args=trace_args)
        with server:
            stats = grpcclient.InferenceServerClient(server.grpc_url)
            asyncio.run(stream_all(server.grpc_url, args.warmup))
            before = call_times(stats)
            times = asyncio.run(stream_all(server.grpc_url, args.requests))
            after = call_times(stats)
        traces = read_traces(trace_file)[args.warmup:]
    if len(traces) != len(times):
        raise SystemExit(f"{len(traces)} traced tts requests for {len(times)} streams")
    rows: dict[str, list[float]] = defaultdict(list)
    for trace, (sent, received) in zip(traces, times, strict=True):
        stamps = {**trace, "sent": sent, "received": received}
        for hop, begin, end in HOPS:
            rows[hop].append((stamps[end] - stamps[begin]) / 1e6)
        rows["first chunk at the client"].append((received - sent) / 1e6)
    print(f"target {args.target}{' under MPS' if args.mps else ''}: {len(times)} streams one at a time (after "
          f"{args.warmup} warm-up streams)")
    print("| hop | median ms | p90 ms |\n|---|---:|---:|")
    for hop, values in rows.items():
        print(_row(hop, values))
    print("\n| network | calls per stream | request ms (mean) | of which queue | of which compute |")
    print("|---|---:|---:|---:|---:|")
    first_calls = 0.0
    for name in NETWORKS:
        calls, request, queue, compute = (a - b for a, b in zip(after[name], before[name], strict=True))
        first_calls += request / calls / 1e6
        print(f"| {name} | {calls / len(times):.1f} | {request / calls / 1e6:.2f} | {queue / calls / 1e6:.2f} | "
              f"{compute / calls / 1e6:.2f} |")
    bls = statistics.median(rows["BLS: execute to the first chunk sent"])
    g2p = statistics.median(_g2p_ms(SENTENCES[i % len(SENTENCES)][1]) for i in range(len(times)))
    # The first chunk's vocoder call has the shortest window: the mean overstates it, so the BLS's share is a floor.
    print(f"BLS to the first chunk {bls:.2f} ms = one call of each network in Triton, about {first_calls:.2f} ms "
          f"(mean request times), + the BLS's own, at least {bls - first_calls:.2f} ms (G2P {g2p:.2f} ms of it, "
          "timed here)")
    return 0


def _g2p_ms(text: str) -> float:
    began = time.perf_counter()
    text_to_sequences(text, STREAMING.max_tokens)
    return (time.perf_counter() - began) * 1e3


if __name__ == "__main__":
    raise SystemExit(main())
