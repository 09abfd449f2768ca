"""The ``gateway`` command: the OpenAI- and ElevenLabs-compatible gateway's options, checked, and the gateway
served with them (:func:`~tts_triton.gateway.server.serve`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tts_triton.console import fail
from tts_triton.core.endpoints import DEFAULT_GRPC_URL

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from tts_triton.gateway import GatewayConfig, serve
    from tts_triton.gateway.limits import auth_problem, load_api_keys
    from tts_triton.gateway.server import TlsFiles
    from tts_triton.gateway.sessions import SessionLimits
    from tts_triton.gateway.voice_map import load_voice_map

    try:
        keys = load_api_keys(args.api_keys_file)
        voice_map = load_voice_map(args.voice_map)
    except (OSError, ValueError) as err:
        return fail(str(err))
    if problem := auth_problem(args.host, keys, allow_anonymous=args.allow_anonymous):
        return fail(problem)
    from tts_triton.client.balancer import parse_targets

    try:
        endpoints = parse_targets(args.triton_url or [DEFAULT_GRPC_URL])
    except ValueError as err:
        return fail(f"--triton-url: {err}")
    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        return fail("--ssl-certfile and --ssl-keyfile go together")
    for path in (args.ssl_certfile, args.ssl_keyfile):
        if path is not None and not path.is_file():
            return fail(f"{path}: no such file")
    tls = TlsFiles(args.ssl_certfile, args.ssl_keyfile) if args.ssl_certfile else None
    origins = tuple(o.strip().rstrip("/") for o in ",".join(args.ws_allowed_origin or []).split(",") if o.strip())
    sessions = SessionLimits(max_sessions=args.max_sessions, max_sessions_per_key=args.max_sessions_per_key,
                             max_session_s=args.max_session_seconds, max_session_chars=args.max_session_chars,
                             allowed_origins=origins, allow_key_in_url=args.allow_key_in_url)
    config = GatewayConfig(triton_endpoints=endpoints, api_keys=keys, max_streams=args.max_streams,
                           max_input_chars=args.max_input_chars, request_timeout_s=args.timeout,
                           voice_map=voice_map, sessions=sessions, header_timeout_s=args.header_timeout,
                           body_timeout_s=args.body_timeout, keep_alive_s=args.keep_alive,
                           max_connections=args.max_connections, max_streams_per_key=args.max_streams_per_key,
                           requests_per_minute=args.requests_per_minute, max_audio_seconds=args.max_audio_seconds,
                           shared_cache=args.shared_cache)
    scheme = "https" if tls else "http"
    print(f"gateway: {scheme}://{args.host}:{args.port}/v1/audio/speech and {'wss' if tls else 'ws'}://"
          f"{args.host}:{args.port}/v1/text-to-speech/{{voice_id}}/stream-input -> Triton {', '.join(endpoints)} "
          f"(API keys: {len(keys) or 'off'}, at most {args.max_streams} streams, {args.max_sessions} sessions)",
          flush=True)
    serve(config, host=args.host, port=args.port, log_level=args.log_level, tls=tls)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``gateway`` on the ``tts-triton`` subcommands."""
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
    g.add_argument("--max-streams-per-key", type=int,
                   help="concurrent streams of one API key; more get 429 (default: a quarter of --max-streams)")
    g.add_argument("--requests-per-minute", type=int, default=600,
                   help="requests and sessions one API key may start per minute; more get 429 with Retry-After "
                        "(default %(default)s; 0: no bound)")
    g.add_argument("--max-audio-seconds", type=float, default=900.0,
                   help="seconds of audio one request may ask for, estimated from its text (numbers read in words, "
                        "SSML breaks, the speed) before synthesis; more is 413 (default %(default)s)")
    g.add_argument("--shared-cache", action="store_true",
                   help="share the utterance cache's audio across API keys (off: each key hits only what its own "
                        "requests synthesized, so that no key learns from a hit's speed what another had spoken)")
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
                   help="JSON object of OpenAI voice name -> preset (or a list of presets, the first the server has "
                        "wins), over the built-in table")
    g.add_argument("--ssl-certfile", type=Path, help="PEM certificate: serve https:// and wss:// (with --ssl-keyfile)")
    g.add_argument("--ssl-keyfile", type=Path, help="PEM private key of --ssl-certfile")
    g.add_argument("--max-sessions", type=int, default=64,
                   help="concurrent input-streaming WebSocket sessions; more are closed at once with code 1013 "
                        "(default %(default)s)")
    g.add_argument("--max-sessions-per-key", type=int, default=16,
                   help="concurrent sessions of one API key (default %(default)s)")
    g.add_argument("--max-session-seconds", type=float, default=600.0,
                   help="longest session; longer is closed with code 1008 (default %(default)s)")
    g.add_argument("--max-session-chars", type=int, default=50_000,
                   help="characters of text one session may send; more closes it with code 1009 (default %(default)s)")
    g.add_argument("--ws-allowed-origin", action="append", metavar="ORIGIN",
                   help="an Origin (https://app.example.com; repeat or comma-separate; * for any) whose web pages may "
                        "open sessions; a handshake with another Origin is answered 403 (default: none; clients that "
                        "are not browsers send no Origin)")
    g.add_argument("--allow-key-in-url", action="store_true",
                   help="accept a session's API key in its URL (?xi_api_key=), which proxies and logs keep (off)")
    g.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="uvicorn's log level (default %(default)s)")
    g.set_defaults(func=_run)
