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

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from tts_triton.core.contract import OUTPUT_SAMPLE_RATES  # noqa: E402
from tts_triton.core.endpoints import DEFAULT_GRPC_URL, DEFAULT_HTTP_URL, GRPC_PORT, HTTP_PORT, METRICS_PORT  # noqa: E402
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
START_HINT = "is the server running? start one with `tts-triton serve` (it prints `ready:` when it is)"
#: `say -o` suffix -> soundfile (format, subtype); `-o -` streams WAV (or raw PCM) to stdout.
OUTPUT_FORMATS = {".wav": ("WAV", "PCM_16"), ".flac": ("FLAC", "PCM_16"), ".ogg": ("OGG", "VORBIS"),
                  ".mp3": ("MP3", "MPEG_LAYER_III")}


def _fail(message: str) -> int:
    """Print a one-line error and return the exit status 1."""
    print(f"error: {message}", file=sys.stderr)
    return 1


def _build(args: argparse.Namespace) -> int:
    from tts_triton.export.build import ensure_repository
    from tts_triton.export.repository import EnginesMissingError

    choice = resolve_target(args.target)
    print(f"target: {choice.name} ({choice.reason})", flush=True)
    try:
        ensure_repository(args.out, checkpoint=args.checkpoint, target=choice.name, force=args.force,
                          engines_dir=args.engines_dir)
    except EnginesMissingError as err:
        return _fail(str(err))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from tts_triton.ops.serve import serve

    return serve(args, parent_at_start=_PARENT_AT_START)


def _say_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the ``say`` arguments before anything is sent; ``None`` if nothing."""
    if args.reference and (args.voice or args.emotion):
        return "--reference sets the voice and emotion itself: drop --voice/--emotion, or drop --reference"
    if args.reference and not args.reference.is_file():
        return f"--reference {args.reference}: no such file"
    sources = [name for name, given in (("TEXT", args.text), ("--text-file", args.text_file),
                                        ("--ssml FILE", args.ssml)) if given]
    if len(sources) > 1:
        return f"give the text one way: {' or '.join(sources)}, not both"
    for option, path in (("--text-file", args.text_file), ("--ssml", args.ssml)):
        if path and path != "-" and not Path(path).is_file():
            return f"{option} {path}: no such file"
    if not sources and sys.stdin.isatty():
        return "give the text to speak: as arguments, with --text-file FILE, or on standard input (echo Hi | ...)"
    if args.raw and str(args.output) != "-":
        return "--raw is for -o - (headerless PCM on standard output); a file's format follows its suffix"
    if str(args.output) == "-":
        return None
    if args.output.is_dir():
        return f"-o {args.output} is a folder: give a file name, e.g. {args.output / 'out.wav'}"
    if args.output.suffix.lower() not in OUTPUT_FORMATS:
        return (f"-o {args.output}: cannot write {args.output.suffix or 'a file without a suffix'}; "
                f"use {', '.join(OUTPUT_FORMATS)}, or - for WAV on stdout")
    folder = args.output.absolute().parent
    if not folder.is_dir():
        return f"-o {args.output}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"-o {args.output}: folder {folder} is not writable"
    return None


def _say_text(args: argparse.Namespace) -> tuple[str, bool]:
    """``say``'s text and whether it is SSML: the arguments, ``--text-file``, ``--ssml FILE``, or standard input
    (for ``-`` or nothing). Raises ``ValueError`` naming the source when it cannot be read or is empty."""
    ssml = args.ssml is not None
    path = args.ssml or args.text_file
    if path is None and args.text and args.text != ["-"]:
        return " ".join(args.text), ssml
    stdin = path in (None, "-")
    source = "standard input" if stdin else path
    try:
        raw = sys.stdin.buffer.read() if stdin else Path(path).read_bytes()
        text = raw.decode("utf-8")
    except OSError as err:
        raise ValueError(f"{source}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{source} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not text.strip():
        raise ValueError(f"{source} is empty: nothing to speak")
    return text, ssml


def _transport_hint(err: Exception, args: argparse.Namespace) -> str:
    """A one-line reason for a failed request, with what to do about it."""
    from tts_triton.client import ServerUnavailableError

    url = ",".join(args.url) if args.url else (DEFAULT_HTTP_URL if args.http else DEFAULT_GRPC_URL)
    if not args.http and _answers_http(url.split(",")[0]):
        return (f"{url} is Triton's HTTP port, not its gRPC port: use the gRPC port "
                f"({GRPC_PORT} by default), or add --http")
    if isinstance(err, ServerUnavailableError):
        return f"cannot reach the server at {url}: {err}; {START_HINT}"
    if args.http:  # geventhttpclient's parser failed: not an HTTP server, e.g. Triton's gRPC port
        return (f"{url} does not answer HTTP ({type(err).__name__}: {err}); is it the gRPC port? "
                f"Triton's HTTP port is {HTTP_PORT} by default, or drop --http to use gRPC")
    return f"{url}: {err}"


def _answers_http(url: str) -> bool:
    """Whether ``url`` (host:port) answers Triton's HTTP liveness endpoint within a second."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{url.split('://', 1)[-1]}/v2/health/live", timeout=1) as response:
            return response.status == 200
    except Exception:  # anything but an HTTP answer: not an HTTP port
        return False


def _write_audio(output: Path, audio: object, sample_rate: int) -> None:
    """Write ``audio`` in the format of ``output``'s suffix (:data:`OUTPUT_FORMATS`)."""
    import numpy as np
    import soundfile as sf

    samples = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    file_format, subtype = OUTPUT_FORMATS[output.suffix.lower()]
    sf.write(output, samples, sample_rate, format=file_format, subtype=subtype)


class _PipeClosed(Exception):
    """The reader of standard output went away (a broken pipe)."""


class _StdoutAudio:
    """Audio written to standard output as it comes: 16-bit PCM, after a WAV header unless ``raw`` (with the exact
    size when the whole audio is written at once, else the streaming size: :func:`tts_triton.core.audio.wav_header`).
    A broken pipe raises :class:`_PipeClosed`."""

    def __init__(self, raw: bool) -> None:
        self.raw = raw
        self.bytes = 0

    def write(self, samples: Any, sample_rate: int, whole: bool = False) -> None:
        from tts_triton.core.audio import pcm16, wav_header

        pcm = pcm16(samples)
        if self.bytes == 0 and not self.raw:
            pcm = wav_header(sample_rate, len(pcm) if whole else None) + pcm
        try:
            sys.stdout.buffer.write(pcm)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise _PipeClosed from None
        self.bytes += len(pcm)


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush into a closed pipe is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _stream_say(client: Any, text: str, options: dict[str, Any], out: _StdoutAudio | None) -> Any:
    """Stream ``text`` through the gRPC ``client``, each chunk to ``out`` as it arrives (None: only kept); the whole
    :class:`~tts_triton.client.Synthesis`. A closed pipe closes the stream (an in-band stop) and raises."""
    import contextlib
    import time

    from tts_triton.client import Synthesis

    start = time.perf_counter()
    chunks = []
    with contextlib.closing(client.stream(text, **options)) as stream:
        for chunk in stream:
            chunks.append(chunk)
            if out is not None and chunk.audio.size:
                out.write(chunk.audio, chunk.sample_rate)
    return Synthesis.from_chunks(chunks, time.perf_counter() - start)


def _say(args: argparse.Namespace) -> int:
    from tts_triton.client import TTSClient, TTSError

    if problem := _say_problem(args):
        return _fail(problem)
    failures: tuple[type[Exception], ...] = (TTSError,)
    if args.http:  # tritonclient's http extra (gevent): a gRPC-only environment, e.g. a GPU host's, lacks it
        from geventhttpclient.response import HTTPParseError

        from tts_triton.client import HttpTTSClient

        failures += (HTTPParseError,)
    try:
        text, ssml = _say_text(args)
    except ValueError as err:
        return _fail(str(err))
    options = {"reference_audio": args.reference} if args.reference else {"voice": args.voice, "emotion": args.emotion}
    options.update(speed=args.speed, pitch=args.pitch, volume=args.volume, sample_rate=args.sample_rate, ssml=ssml,
                   return_words=bool(args.words or args.srt or args.vtt))
    if args.ssml:  # a markup file is sent as it is (an XML declaration may come before <speak>)
        text, options["ssml"] = "", text
    out = _StdoutAudio(args.raw) if str(args.output) == "-" else None
    try:
        if args.http:
            with HttpTTSClient(args.url or DEFAULT_HTTP_URL, timeout=args.timeout) as client:
                result = client.synthesize(text, **options)
            if out is not None:
                out.write(result.audio, result.sample_rate, whole=True)
        else:
            with TTSClient(args.url or DEFAULT_GRPC_URL, timeout=args.timeout) as client:
                result = _stream_say(client, text, options, out)
        if out is None:
            _write_audio(args.output, result.audio, result.sample_rate)
    except _PipeClosed:
        _quiet_stdout()
        print(f"stopped: standard output was closed after {out.bytes if out else 0} bytes; request stopped",
              file=sys.stderr)
        return 0
    except failures as err:
        return _fail(_transport_hint(err, args))
    except ValueError as err:  # the client's URL check: "expected a grpc:// URL or host:port, got ..."
        return _fail(f"--url {','.join(args.url or [])}: {err}" + ("" if args.http else "; for HTTP add --http"))
    except OSError as err:  # the output file could not be written
        return _fail(f"-o {args.output}: {err.strerror or err}")
    try:
        _write_words(args, result.words)
    except OSError as err:
        return _fail(f"{err.filename}: {err.strerror or err}")
    print(f"wrote {'stdout' if out else args.output}: {result.duration:.2f} s of audio in {result.chunks} chunk(s); "
          f"first audio after {result.first_chunk_latency * 1000:.0f} ms, total {result.total_time * 1000:.0f} ms",
          file=sys.stderr if out else sys.stdout)
    return 0


def _port(text: str) -> int:
    """An argparse type: a TCP port number, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


def _write_words(args: argparse.Namespace, words: Sequence[Any]) -> None:
    """``say --words/--srt/--vtt``: the word timestamps as JSON and subtitles."""
    from tts_triton.client.subtitles import to_srt, to_vtt, words_to_json

    for path, render in ((args.words, words_to_json), (args.srt, to_srt), (args.vtt, to_vtt)):
        if path is not None:
            path.write_text(render(words), encoding="utf-8")
            print(f"wrote {path}: {len(words)} words", file=sys.stderr)


def _voices(args: argparse.Namespace) -> int:
    from tts_triton.client import ServerUnavailableError, TTSClient, TTSError

    try:
        with TTSClient(args.url, timeout=args.timeout) as client:
            bank = client.voices()
    except ServerUnavailableError as err:
        return _fail(f"cannot reach the server at {args.url}: {err}; {START_HINT}")
    except TTSError as err:
        return _fail(f"{args.url}: {err}")
    print(f"voices:   {', '.join(bank.voices)}  (default {bank.default_voice})")
    print(f"emotions: {', '.join(bank.emotions)}  (default {bank.default_emotion})")
    return 0


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
        return _fail(f"{LOADTEST_DIR}/locustfile.py not found: the load test runs from a source checkout")
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
        return _fail(f"report.py failed (exit {report}); the Locust results are in {out}")
    print(f"report: {out / 'report.png'}, {out / 'report.html'}, {out / 'requests.csv'}"
          + ("" if status == 0 else f"; Locust exited with {status} (failed requests: see {out / 'locust.log'})"))
    return status


def _gateway(args: argparse.Namespace) -> int:
    from tts_triton.gateway import GatewayConfig, serve
    from tts_triton.gateway.limits import auth_problem, load_api_keys
    from tts_triton.gateway.server import TlsFiles
    from tts_triton.gateway.sessions import SessionLimits
    from tts_triton.gateway.voices import load_voice_map

    try:
        keys = load_api_keys(args.api_keys_file)
        voice_map = load_voice_map(args.voice_map)
    except (OSError, ValueError) as err:
        return _fail(str(err))
    if problem := auth_problem(args.host, keys, allow_anonymous=args.allow_anonymous):
        return _fail(problem)
    from tts_triton.client.balancer import parse_targets

    try:
        endpoints = parse_targets(args.triton_url or [DEFAULT_GRPC_URL])
    except ValueError as err:
        return _fail(f"--triton-url: {err}")
    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        return _fail("--ssl-certfile and --ssl-keyfile go together")
    for path in (args.ssl_certfile, args.ssl_keyfile):
        if path is not None and not path.is_file():
            return _fail(f"{path}: no such file")
    tls = TlsFiles(args.ssl_certfile, args.ssl_keyfile) if args.ssl_certfile else None
    sessions = SessionLimits(max_sessions=args.max_sessions, max_sessions_per_key=args.max_sessions_per_key,
                             max_session_s=args.max_session_seconds)
    config = GatewayConfig(triton_endpoints=endpoints, api_keys=keys, max_streams=args.max_streams,
                           max_input_chars=args.max_input_chars, request_timeout_s=args.timeout,
                           voice_map=voice_map, sessions=sessions, header_timeout_s=args.header_timeout,
                           body_timeout_s=args.body_timeout, keep_alive_s=args.keep_alive,
                           max_connections=args.max_connections)
    scheme = "https" if tls else "http"
    print(f"gateway: {scheme}://{args.host}:{args.port}/v1/audio/speech and {'wss' if tls else 'ws'}://"
          f"{args.host}:{args.port}/v1/text-to-speech/{{voice_id}}/stream-input -> Triton {', '.join(endpoints)} "
          f"(API keys: {len(keys) or 'off'}, at most {args.max_streams} streams, {args.max_sessions} sessions)",
          flush=True)
    serve(config, host=args.host, port=args.port, log_level=args.log_level, tls=tls)
    return 0


def _gateway_parser(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("gateway", help="OpenAI-compatible speech API (/v1/audio/speech) in front of Triton",
                       description="Serve OpenAI's POST /v1/audio/speech (mp3, opus, aac, flac, wav, pcm; "
                                   "streamed), ElevenLabs' input-streaming WebSockets (/v1/text-to-speech/"
                                   "{voice_id}/stream-input and multi-stream-input) plus /v1/audio/voices, /healthz, "
                                   "/readyz and /metrics, talking to the streaming tts model of one or more "
                                   "running Tritons over gRPC.")
    g.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s: loopback only)")
    g.add_argument("--port", type=int, default=8080, help="HTTP port (default %(default)s)")
    g.add_argument("--triton-url", action="append", metavar="ENDPOINT",
                   help=f"Triton's gRPC address, host:port or dns:///NAME:PORT (every address of NAME, re-resolved); "
                        f"repeat it or give a comma-separated list for several servers: each stream goes to the one "
                        f"with the fewest in flight (default {DEFAULT_GRPC_URL})")
    g.add_argument("--api-keys-file", type=Path,
                   help="file of API keys, one per line (also read: $TTS_GATEWAY_API_KEYS, comma-separated)")
    g.add_argument("--allow-anonymous", action="store_true",
                   help="serve without API keys on a non-loopback --host (off by default)")
    g.add_argument("--max-streams", type=int, default=64,
                   help="concurrent streams; more get 429 with Retry-After (default %(default)s)")
    g.add_argument("--max-input-chars", type=int, default=4096,
                   help="longest `input`; longer is 413 (default %(default)s, OpenAI's limit)")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds one synthesis may take (default %(default)s)")
    g.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a request's head may take to arrive; then 408 and close (default %(default)s)")
    g.add_argument("--body-timeout", type=float, default=10.0,
                   help="seconds a request's body may take after its head; then 408 and close (default %(default)s)")
    g.add_argument("--keep-alive", type=float, default=5.0,
                   help="seconds an idle kept-alive connection stays open (default %(default)s; behind a proxy, "
                        "more than the proxy's own upstream keep-alive)")
    g.add_argument("--max-connections", type=int, default=8192,
                   help="connections open at once; one more is answered 503 with Retry-After (default %(default)s)")
    g.add_argument("--voice-map", type=Path,
                   help="JSON object of OpenAI voice name -> preset, over the built-in table")
    g.add_argument("--ssl-certfile", type=Path, help="PEM certificate: serve https:// and wss:// (with --ssl-keyfile)")
    g.add_argument("--ssl-keyfile", type=Path, help="PEM private key of --ssl-certfile")
    g.add_argument("--max-sessions", type=int, default=64,
                   help="concurrent input-streaming WebSocket sessions; more are closed at once with code 1013 "
                        "(default %(default)s)")
    g.add_argument("--max-sessions-per-key", type=int, default=16,
                   help="concurrent sessions of one API key (default %(default)s)")
    g.add_argument("--max-session-seconds", type=float, default=600.0,
                   help="longest session; longer is closed with code 1008 (default %(default)s)")
    g.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="uvicorn's log level (default %(default)s)")
    g.set_defaults(func=_gateway)


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
                        "nvidia-cuda-mps-control is installed, the configuration the H200 benchmark measures best)")
    s.add_argument("--exit-with-parent", nargs="?", type=int, const=0, metavar="PID",
                   help="stop when the process that started serve (or PID, e.g. a script's $$) exits, even by "
                        "SIGKILL; a parent already gone stops serve at once (for scripts)")
    s.add_argument("--lexicon", type=Path, metavar="FILE",
                   help="pronunciation lexicon: lines of WORD<TAB>PRONUNCIATION (/IPA/ or a respelling), checked "
                        "now and read again by the server whenever the file changes")
    from tts_triton.cache.settings import add_arguments as add_cache_arguments

    add_cache_arguments(s)
    s.set_defaults(func=_serve)


def _client_parsers(sub: argparse._SubParsersAction) -> None:
    y = sub.add_parser("say", help="speak TEXT through a running server into an audio file",
                       description="Synthesize TEXT on a running server (gRPC stream of `tts`, or HTTP "
                                   "`tts_offline` with --http) and write an audio file, or stream it to standard "
                                   "output with -o -. The text comes from the arguments, --text-file, or standard "
                                   "input (echo Hello | tts-triton say -o - | aplay).")
    y.add_argument("text", nargs="*", help="the text to speak (plain, or SSML starting with <speak>); - or nothing: "
                                           "read it from standard input")
    y.add_argument("--text-file", metavar="FILE", help="read the text to speak from FILE (UTF-8; - for stdin)")
    y.add_argument("-o", "--output", type=Path, default=Path("out.wav"),
                   help="audio file: .wav, .flac, .ogg or .mp3 by its suffix, or - to stream WAV to stdout as it "
                        "arrives (closing the pipe stops the request; default %(default)s)")
    y.add_argument("--raw", action="store_true",
                   help="with -o -: headerless 16-bit little-endian mono PCM instead of WAV")
    y.add_argument("--sample-rate", type=int, choices=OUTPUT_SAMPLE_RATES, metavar="HZ",
                   help=f"audio sample rate: {', '.join(map(str, OUTPUT_SAMPLE_RATES))} (default: the model's, "
                        "22050)")
    y.add_argument("--voice", help="preset voice (default: the server's; `tts-triton voices` lists them)")
    y.add_argument("--emotion", help="neutral, happy, sad, angry or surprised (default: the server's)")
    y.add_argument("--reference", type=Path, help="audio file whose style to copy (instead of --voice/--emotion)")
    y.add_argument("--url", action="append", metavar="ENDPOINT",
                   help=f"server address (default {DEFAULT_GRPC_URL}, or {DEFAULT_HTTP_URL} with --http); repeat it "
                        "or give a comma-separated list for several servers (dns:///NAME:PORT: every address of NAME): "
                        "the request goes to one of them and, failing before any audio, once to another")
    y.add_argument("--http", action="store_true", help="use HTTP and tts_offline instead of the gRPC stream")
    y.add_argument("--timeout", type=float, default=120.0, help="seconds allowed (default %(default)s)")
    y.add_argument("--speed", type=float, help="speaking rate, 0.5-2 (1: as trained)")
    y.add_argument("--pitch", type=float, help="pitch shift in semitones, -12..12")
    y.add_argument("--volume", type=float, help="gain in dB, -30..12")
    y.add_argument("--ssml", nargs="?", const="", metavar="FILE",
                   help="speak this SSML file (- for stdin) instead of TEXT; without FILE: the text is SSML "
                        "(wrapped in <speak> if it is not)")
    y.add_argument("--words", type=Path, metavar="OUT.json", help="write the word timestamps as JSON")
    y.add_argument("--srt", type=Path, metavar="OUT.srt", help="write SubRip subtitles from the word timestamps")
    y.add_argument("--vtt", type=Path, metavar="OUT.vtt", help="write WebVTT subtitles from the word timestamps")
    y.set_defaults(func=_say)

    v = sub.add_parser("voices", help="list the server's voices and emotions",
                       description="List the voices and emotions of a running server (gRPC).")
    v.add_argument("--url", default=DEFAULT_GRPC_URL, help="gRPC address (default %(default)s)")
    v.add_argument("--timeout", type=float, default=10.0, help="seconds allowed (default %(default)s)")
    v.set_defaults(func=_voices)

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
    _client_parsers(sub)
    _build_parser(sub)
    _gateway_parser(sub)
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
        from tts_triton.gateway.bench import main as bench_gateway_main

        return bench_gateway_main(argv[1:])
    if argv[:1] == ["bench-stream"]:  # parses its own options too
        from tts_triton.gateway.stream_bench import main as bench_stream_main

        return bench_stream_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling (e.g. during its imports)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
