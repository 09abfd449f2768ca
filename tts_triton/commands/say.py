"""The ``say`` and ``voices`` commands: a running server's client at the command line.

``say`` speaks text from its arguments, ``--text-file`` or standard input into an audio file, or streams it to
standard output as it arrives (``-o -``; a closed pipe stops the request in-band); ``voices`` lists the bank.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tts_triton.console import fail
from tts_triton.core.contract import OUTPUT_SAMPLE_RATES
from tts_triton.core.endpoints import DEFAULT_GRPC_URL, DEFAULT_HTTP_URL, GRPC_PORT, HTTP_PORT

__all__ = ["OUTPUT_FORMATS", "START_HINT", "add_parsers"]

START_HINT = "is the server running? start one with `tts-triton serve` (it prints `ready:` when it is)"
#: `say -o` suffix -> soundfile (format, subtype); `-o -` streams WAV (or raw PCM) to stdout.
OUTPUT_FORMATS = {".wav": ("WAV", "PCM_16"), ".flac": ("FLAC", "PCM_16"), ".ogg": ("OGG", "VORBIS"),
                  ".mp3": ("MP3", "MPEG_LAYER_III")}


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
        return fail(problem)
    failures: tuple[type[Exception], ...] = (TTSError,)
    if args.http:  # tritonclient's http extra (gevent): a gRPC-only environment, e.g. a GPU host's, lacks it
        from geventhttpclient.response import HTTPParseError

        from tts_triton.client import HttpTTSClient

        failures += (HTTPParseError,)
    try:
        text, ssml = _say_text(args)
    except ValueError as err:
        return fail(str(err))
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
        return fail(_transport_hint(err, args))
    except ValueError as err:  # the client's URL check: "expected a grpc:// URL or host:port, got ..."
        return fail(f"--url {','.join(args.url or [])}: {err}" + ("" if args.http else "; for HTTP add --http"))
    except OSError as err:  # the output file could not be written
        return fail(f"-o {args.output}: {err.strerror or err}")
    try:
        _write_words(args, result.words)
    except OSError as err:
        return fail(f"{err.filename}: {err.strerror or err}")
    print(f"wrote {'stdout' if out else args.output}: {result.duration:.2f} s of audio in {result.chunks} chunk(s); "
          f"first audio after {result.first_chunk_latency * 1000:.0f} ms, total {result.total_time * 1000:.0f} ms",
          file=sys.stderr if out else sys.stdout)
    return 0


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
        return fail(f"cannot reach the server at {args.url}: {err}; {START_HINT}")
    except TTSError as err:
        return fail(f"{args.url}: {err}")
    print(f"voices:   {', '.join(bank.voices)}  (default {bank.default_voice})")
    print(f"emotions: {', '.join(bank.emotions)}  (default {bank.default_emotion})")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``say`` and ``voices`` on the ``tts-triton`` subcommands."""
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
    y.add_argument("--pitch", type=float, help="pitch shift in semitones, -12..12 (formants and loudness kept)")
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
