"""tts-triton: build the model repository, serve it, speak, list voices, benchmark, load-test.

  tts-triton serve [--target auto]         run Triton on loopback (builds the repository on first use)
  tts-triton say "Hello there." -o hello.wav [--voice f1 --emotion happy | --reference me.wav]
  echo "Hello there." | tts-triton say -o - | aplay     text from stdin, audio streamed to stdout
  tts-triton voices                        list the running server's voices and emotions
  tts-triton build-repo [--target torch-cuda | tensorrt --engines-dir DIR] [--out DIR]
  tts-triton bench [--concurrency 1 4 16]  latency, real-time factor, throughput
  tts-triton loadtest --users 16 --spawn-rate 4 --duration 1m
  tts-triton gateway [--port 8080]         OpenAI-compatible /v1/audio/speech in front of a running server
  tts-triton bench-gateway --out DIR       the gateway's first byte and throughput against direct gRPC
  tts-triton bench-stream --out DIR        streamed text in (stream-input): first audio, sessions, cut prosody

The model repository defaults to ~/.cache/tts-triton/model_repository ($XDG_CACHE_HOME), whatever the
working directory. Each command has its own --help.
"""

from __future__ import annotations

import os

#: Taken before any other import: `serve --exit-with-parent` without a pid watches this process (a parent
#: that died during the imports would otherwise read as pid 1, and the server would outlive it).
_PARENT_AT_START = os.getppid()

from tts_triton.processes import exec_after_fork_only  # noqa: E402

exec_after_fork_only()  # before anything imports grpc

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from tts_triton.commands import gateway as gateway_command  # noqa: E402
from tts_triton.commands import say  # noqa: E402
from tts_triton.console import fail  # noqa: E402
from tts_triton.core.endpoints import DEFAULT_GRPC_URL, GRPC_PORT, HTTP_PORT, METRICS_PORT  # noqa: E402
from tts_triton.core.paths import default_model_repository  # noqa: E402
from tts_triton.export.targets import (  # noqa: E402
    AUTO,
    DEFAULT_TARGET,
    RUNTIME_TARGETS,
    embedded_targets,
    resolve_target,
)

#: The Locust load test lives in the source checkout, beside the package.
LOADTEST_DIR = Path(__file__).resolve().parents[1] / "loadtest"


def _build(args: argparse.Namespace) -> int:
    from tts_triton.export.build import ensure_repository
    from tts_triton.export.repository import EnginesMissingError

    choice = resolve_target(args.target)
    print(f"target: {choice.name} ({choice.reason})", flush=True)
    try:
        ensure_repository(args.out, checkpoint=args.checkpoint, target=choice.name, force=args.force,
                          engines_dir=args.engines_dir)
    except EnginesMissingError as err:
        return fail(str(err))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from tts_triton.processes.serve import serve

    return serve(args, parent_at_start=_PARENT_AT_START)


def _port(text: str) -> int:
    """An argparse type: a TCP port number, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


def loadtest_command(args: argparse.Namespace, out: Path) -> list[str]:
    """The headless Locust command line of ``tts-triton loadtest``, run with this interpreter."""
    locustfile, host = (("gateway_locustfile.py", args.gateway) if args.gateway
                        else ("locustfile.py", ",".join(args.url or [f"grpc://{DEFAULT_GRPC_URL}"])))
    return [sys.executable, "-m", "locust", "-f", str(LOADTEST_DIR / locustfile), "--headless",
            "--users", str(args.users), "--spawn-rate", str(args.spawn_rate), "--run-time", args.duration,
            "--host", host, "--stop-timeout", str(args.stop_timeout), "--csv", str(out / "locust"),
            "--csv-full-history", "--html", str(out / "report.html"), "--logfile", str(out / "locust.log")]


def _loadtest(args: argparse.Namespace) -> int:
    if not (LOADTEST_DIR / "locustfile.py").is_file():
        return fail(f"{LOADTEST_DIR}/locustfile.py not found: the load test runs from a source checkout")
    out = args.out or Path("runs", "loadtest", dt.datetime.now().strftime("%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TTS_RESULTS_DIR": str(out)}
    if args.repeat_ratio is not None:  # the locustfile's texts (tts_triton.bench.workload)
        env["TTS_REPEAT_RATIO"] = str(args.repeat_ratio)
    target = args.gateway or ",".join(args.url or [f"grpc://{DEFAULT_GRPC_URL}"])
    print(f"==> locust: {args.users} users, {args.spawn_rate}/s, {args.duration} against {target} -> {out}", flush=True)
    status = subprocess.run(loadtest_command(args, out), env=env, check=False).returncode
    report = subprocess.run([sys.executable, str(LOADTEST_DIR / "report.py"), str(out)], check=False).returncode
    if report:
        return fail(f"report.py failed (exit {report}); the Locust results are in {out}")
    print(f"report: {out / 'report.png'}, {out / 'report.html'}, {out / 'requests.csv'}"
          + ("" if status == 0 else f"; Locust exited with {status} (failed requests: see {out / 'locust.log'})"))
    return status


def _repository_options(p: argparse.ArgumentParser, folder: str, folder_help: str, default_target: str,
                        targets: list[str], target_help: str) -> None:
    """``--checkpoint``, the repository folder and ``--target``: what build-repo and serve build from and into."""
    p.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    p.add_argument(folder, type=Path, default=default_model_repository(), help=f"{folder_help} (default %(default)s)")
    p.add_argument("--target", default=default_target, choices=[AUTO, *targets], help=target_help)


def _build_parser(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("build-repo", help="export the networks and write the Triton model repository",
                       description="Export the checkpoint's networks to ONNX and write a Triton model repository "
                                   "for one runtime; a current repository is left as it is.")
    _repository_options(b, "--out", "repository folder", DEFAULT_TARGET, list(RUNTIME_TARGETS),
                        "runtime: onnxruntime-python (embedded server, CPU; default), torch-cuda (embedded server, "
                        "PyTorch with CUDA graphs on a GPU), onnxruntime or tensorrt (for "
                        "nvcr.io/nvidia/tritonserver:24.10-py3; tensorrt needs --engines-dir), or auto (torch-cuda "
                        "when a CUDA GPU and a CUDA build of PyTorch are here, else onnxruntime-python)")
    b.add_argument("--engines-dir", type=Path,
                   help="folder of <network>.plan built by `python -m tts_triton.export.tensorrt` (tensorrt only)")
    b.add_argument("--force", action="store_true", help="rebuild even when the repository is current")
    b.set_defaults(func=_build)


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("serve", help="run the embedded Triton server (building the repository if needed)",
                       description="Run Triton 2.51 (from nvidia-pytriton) on a model repository until Ctrl-C, "
                                   "SIGTERM or SIGHUP; its ports are checked first.")
    _repository_options(s, "--model-repository", "repository to serve, built or rebuilt when stale", AUTO,
                        embedded_targets(),
                        "runtime the repository is built for: auto (default: torch-cuda when a CUDA GPU and a CUDA "
                        "build of PyTorch are here, else onnxruntime-python), onnxruntime-python (CPU) or "
                        "torch-cuda (GPU); a repository built for another target is rebuilt")
    s.add_argument("--no-build", action="store_true", help="serve the repository as it is")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s: loopback only)")
    s.add_argument("--http-port", type=_port, default=HTTP_PORT, help="HTTP port (default %(default)s)")
    s.add_argument("--grpc-port", type=_port, default=GRPC_PORT, help="gRPC port (default %(default)s)")
    s.add_argument("--metrics-port", type=_port, default=METRICS_PORT,
                   help="Prometheus metrics port (default %(default)s)")
    s.add_argument("--log-verbose", type=int, default=0, help="Triton's verbose log level (default %(default)s)")
    s.add_argument("--startup-timeout", type=float, default=300.0,
                   help="seconds allowed for every model to load (default %(default)s)")
    s.add_argument("--health-interval", type=float, default=5.0,
                   help="seconds between deep health checks; a model found dead twice in a row is reloaded "
                        "(the server restarted if that fails); slow models are left alone "
                        "(0: no checks, exit when the server exits; default %(default)s)")
    s.add_argument("--drain-grace", type=float, default=30.0,
                   help="on Ctrl-C/SIGTERM/SIGHUP: seconds the requests in flight may take to finish while new ones "
                        "are refused, before the server stops (0: stop at once; default %(default)s)")
    s.add_argument("--mps", action=argparse.BooleanOptionalAction,
                   help="run the models' CUDA processes under a CUDA MPS daemon of the server's own: their kernels "
                        "then share the GPU instead of taking turns (default: on for the torch-cuda target where "
                        "nvidia-cuda-mps-control is installed, the configuration the GPU benchmark measures best)")
    s.add_argument("--exit-with-parent", nargs="?", type=int, const=0, metavar="PID",
                   help="stop when the process that started serve (or PID, e.g. a script's $$) exits, even by "
                        "SIGKILL; a parent already gone stops serve at once (for scripts)")
    s.add_argument("--lexicon", type=Path, metavar="FILE",
                   help="pronunciation lexicon: lines of WORD<TAB>PRONUNCIATION (/IPA/ or a respelling), checked "
                        "now and read again by the server whenever the file changes")
    from tts_triton.cache.settings import add_arguments as add_cache_arguments

    add_cache_arguments(s)
    s.set_defaults(func=_serve)


def _loadtest_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("loadtest", help="Locust load test of a running server, with a report",
                       description="Run loadtest/locustfile.py headless with this interpreter against a running "
                                   "server, then draw report.png (loadtest/README.md).")
    t.add_argument("--url", action="append", metavar="ENDPOINT",
                   help=f"server (default grpc://{DEFAULT_GRPC_URL}); repeat it or give a comma-separated list to "
                        "spread the users' streams over several servers (least outstanding streams per Locust "
                        "process)")
    t.add_argument("--gateway", metavar="URL",
                   help="load-test the OpenAI-compatible gateway at URL (e.g. http://localhost:8080) instead of gRPC "
                        "(loadtest/gateway_locustfile.py)")
    t.add_argument("--users", type=int, default=8, help="concurrent users (default %(default)s)")
    t.add_argument("--spawn-rate", type=float, default=2.0, help="users started per second (default %(default)s)")
    t.add_argument("--duration", default="1m", help="run time: 30s, 5m, 1h (default %(default)s)")
    t.add_argument("--stop-timeout", type=int, default=30,
                   help="seconds running streams may finish after --duration (default %(default)s)")
    t.add_argument("--out", type=Path, help="results folder (default runs/loadtest/<timestamp>)")
    t.add_argument("--repeat-ratio", type=float, metavar="R",
                   help="share (0-1) of requests that repeat an earlier text, for a server with an utterance cache "
                        "(default: the plain sentence cycle)")
    t.set_defaults(func=_loadtest)


def parser() -> argparse.ArgumentParser:
    """The ``tts-triton`` argument parser (``bench`` parses its own options)."""
    p = argparse.ArgumentParser(prog="tts-triton", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve_parser(sub)
    say.add_parsers(sub)
    _loadtest_parser(sub)
    _build_parser(sub)
    gateway_command.add_parser(sub)
    sub.add_parser("bench", help="benchmark a server: latency, RTF, throughput (tts-triton bench --help)",
                   add_help=False)
    sub.add_parser("bench-gateway", help="the gateway's overhead over direct gRPC (tts-triton bench-gateway --help)",
                   description="Start Triton and a gateway, measure the gateway's first byte and throughput "
                               "against direct gRPC side by side (options: tts-triton bench-gateway --help).",
                   add_help=False)
    sub.add_parser("bench-stream", help="text streamed in at an LLM's pace: first audio, sessions, cut prosody "
                                        "(tts-triton bench-stream --help)",
                   description="Stream text into a gateway's stream-input sockets at an LLM's pace and measure the "
                               "first audio after a sentence's end at several numbers of sessions, and what cutting "
                               "costs in prosody (options: tts-triton bench-stream --help).", add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tts-triton`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its options belong to tts_triton.bench, which parses them itself
        from tts_triton.bench import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["bench-gateway"]:  # parses its own options too
        from tts_triton.bench.gateway import main as bench_gateway_main

        return bench_gateway_main(argv[1:])
    if argv[:1] == ["bench-stream"]:  # parses its own options too
        from tts_triton.bench.stream import main as bench_stream_main

        return bench_stream_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling (e.g. during its imports)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
