"""``tts-triton``: build the model repository, serve it, speak, list voices, benchmark.

    tts-triton serve                         # build ./model_repository if needed, run Triton on loopback
    tts-triton say "Hello there." -o hello.wav [--voice f1 --emotion happy | --reference me.wav]
    tts-triton voices
    tts-triton build-repo [--target tensorrt --out DIR]
    tts-triton bench [--concurrency 1 4 16]
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

DEFAULT_GRPC = "localhost:8001"
DEFAULT_HTTP = "localhost:8000"


def _build(args: argparse.Namespace) -> int:
    from tts_triton.build import ensure_repository

    ensure_repository(args.out, checkpoint=args.checkpoint, target=args.target, force=args.force)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from tts_triton.build import ensure_repository
    from tts_triton.server import TritonServer

    if not args.no_build:
        ensure_repository(args.model_repository, checkpoint=args.checkpoint)
    server = TritonServer(args.model_repository.resolve(), host=args.host, http_port=args.http_port,
                          grpc_port=args.grpc_port, metrics_port=args.metrics_port, log_verbose=args.log_verbose)
    print(f"starting tritonserver on {args.host} (log: {server.log_file}) ...", flush=True)
    server.start(timeout=args.startup_timeout)
    print(f"ready: gRPC {server.grpc_url}  HTTP {server.http_url}  metrics {server.metrics_url}  (Ctrl-C stops)",
          flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return server.wait()
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
        return 0
    finally:
        server.stop()


def _interrupt(*_: object) -> None:
    """SIGTERM handler: stop like Ctrl-C does."""
    raise KeyboardInterrupt


def _say(args: argparse.Namespace) -> int:
    from tts_triton.client import HttpTTSClient, TTSClient, TTSError

    text = " ".join(args.text)
    options = {"voice": args.voice, "emotion": args.emotion}
    if args.reference:
        options = {"reference_audio": args.reference}
    try:
        if args.http:
            with HttpTTSClient(args.url or DEFAULT_HTTP, timeout=args.timeout) as client:
                result = client.synthesize(text, **options)
        else:
            with TTSClient(args.url or DEFAULT_GRPC, timeout=args.timeout) as client:
                result = client.synthesize(text, **options)
    except TTSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    result.save(args.output)
    print(f"wrote {args.output}: {result.duration:.2f} s of audio in {result.chunks} chunk(s); "
          f"first audio after {result.first_chunk_latency * 1000:.0f} ms, total {result.total_time * 1000:.0f} ms")
    return 0


def _voices(args: argparse.Namespace) -> int:
    from tts_triton.client import TTSClient, TTSError

    try:
        with TTSClient(args.url, timeout=args.timeout) as client:
            bank = client.voices()
    except TTSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"voices:   {', '.join(bank.voices)}  (default {bank.default_voice})")
    print(f"emotions: {', '.join(bank.emotions)}  (default {bank.default_emotion})")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tts-triton", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def repo_options(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")

    b = sub.add_parser("build-repo", help="export the networks and write the Triton model repository")
    repo_options(b)
    b.add_argument("--target", default="onnxruntime-python",
                   choices=("onnxruntime-python", "onnxruntime", "tensorrt"), help="runtime the repository is for")
    b.add_argument("--out", type=Path, default=Path("model_repository"))
    b.add_argument("--force", action="store_true", help="rebuild even when the repository is current")
    b.set_defaults(func=_build)

    s = sub.add_parser("serve", help="run the embedded Triton server (building the repository if needed)")
    repo_options(s)
    s.add_argument("--model-repository", type=Path, default=Path("model_repository"))
    s.add_argument("--no-build", action="store_true", help="serve the repository as it is")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    s.add_argument("--http-port", type=int, default=8000)
    s.add_argument("--grpc-port", type=int, default=8001)
    s.add_argument("--metrics-port", type=int, default=8002)
    s.add_argument("--log-verbose", type=int, default=0)
    s.add_argument("--startup-timeout", type=float, default=300.0)
    s.set_defaults(func=_serve)

    y = sub.add_parser("say", help="speak TEXT through a running server into a WAV file")
    y.add_argument("text", nargs="+")
    y.add_argument("-o", "--output", type=Path, default=Path("out.wav"))
    y.add_argument("--voice")
    y.add_argument("--emotion")
    y.add_argument("--reference", type=Path, help="reference audio file whose style to copy")
    y.add_argument("--url", help=f"server address (default {DEFAULT_GRPC}, or {DEFAULT_HTTP} with --http)")
    y.add_argument("--http", action="store_true", help="use HTTP and tts_offline instead of the gRPC stream")
    y.add_argument("--timeout", type=float, default=120.0)
    y.set_defaults(func=_say)

    v = sub.add_parser("voices", help="list the server's voices and emotions")
    v.add_argument("--url", default=DEFAULT_GRPC)
    v.add_argument("--timeout", type=float, default=10.0)
    v.set_defaults(func=_voices)

    sub.add_parser("bench", help="benchmark a server: latency, RTF, throughput (tts-triton bench --help)",
                   add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its options belong to tts_triton.bench, which parses them itself
        from tts_triton.bench import main as bench_main

        return bench_main(argv[1:])
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
