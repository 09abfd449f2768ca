"""A fresh server's first requests against its later ones: first-chunk latency of one text sent N times in a row.

    python -m tts_triton.bench.first_request --out runs/first-request [--no-warm-up] [--requests 10]

Starts two fresh embedded servers of the default repository that share a private ``redis-server`` (the
utterance cache), each the way ``tts-triton serve`` starts it (warmed up before it counts as ready, unless
``--no-warm-up``), then over one already connected gRPC client per server:

- *cache off*: the first server gets the text N times with the request parameter ``cache`` = false (every
  request synthesized);
- *cache on*: the first server stores the text's audio in Redis (one more request), then the second, fresh,
  server gets the text N times: every request a hit, as for a pod that joins a fleet with a shared cache.

Prints a table (first chunk of request 1, 2, N and the ratio of the first to the N-th) and writes
``first-request.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import queue
import sys
import time
from pathlib import Path
from typing import Any

import tritonclient.grpc as grpcclient

from tts_triton.client.request import build_request, is_final_response, new_request_id
from tts_triton.core.contract import AUDIO, CACHE_PARAMETER, TTS

__all__ = ["SENTENCE", "first_chunks", "main"]

SENTENCE = "The first listeners of a new server should not wait longer than the rest."
#: Seconds one request may take.
TIMEOUT_S = 120.0


def first_chunks(url: str, text: str, count: int, *, cache: bool = True) -> list[float]:
    """Seconds from sending to the first audio chunk of ``count`` requests of ``text``, one after another, on
    one gRPC client connected before the first (``cache`` False: each opts out of the utterance cache)."""
    request = build_request(text)
    parameters = {**(request.parameters or {}), **({} if cache else {CACHE_PARAMETER: False})}
    seconds = []
    with grpcclient.InferenceServerClient(url) as client:
        client.is_server_ready()  # the connection is not what is measured
        for _ in range(count):
            responses: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
            client.start_stream(lambda result, error, into=responses: into.put((result, error)))
            start, first = time.perf_counter(), None
            client.async_stream_infer(TTS, request.infer_inputs(grpcclient), request_id=new_request_id(),
                                      parameters=parameters, enable_empty_final_response=True)
            while True:
                result, error = responses.get(timeout=TIMEOUT_S)
                if error is not None:
                    raise RuntimeError(f"{url}: {error}")
                if first is None and result.as_numpy(AUDIO) is not None and result.as_numpy(AUDIO).size:
                    first = time.perf_counter() - start
                if is_final_response(result):
                    break
            client.stop_stream()
            if first is None:
                raise RuntimeError(f"{url}: a stream without audio")
            seconds.append(first)
    return seconds


def _row(label: str, seconds: list[float]) -> list[str]:
    ms = [s * 1000 for s in seconds]
    return [label, f"{ms[0]:.1f}", f"{ms[1]:.1f}", f"{ms[-1]:.1f}", f"{ms[0] / ms[-1]:.2f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.bench.first_request", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/first-request"), help="folder for the report")
    parser.add_argument("--requests", type=int, default=10, help="requests of the text per server (default 10)")
    parser.add_argument("--no-warm-up", action="store_true", help="servers ready as soon as Triton says so")
    parser.add_argument("--model-repository", type=Path,
                        help="a built repository to serve as it is (default: the default one, built if needed)")
    args = parser.parse_args(argv)
    if args.requests < 2:
        parser.error("--requests must be at least 2")

    from tts_triton.cache.settings import ENV_PREFIX
    from tts_triton.core.paths import default_model_repository
    from tts_triton.export.build import ensure_repository
    from tts_triton.jobs.tables import text_table
    from tts_triton.processes.embedded import embedded_server
    from tts_triton.processes.local_redis import LocalRedis

    repository = args.model_repository or ensure_repository(default_model_repository())
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        redis = stack.enter_context(LocalRedis(args.out))
        servers = [embedded_server(repository, environment={ENV_PREFIX + "REDIS_URL": redis.url},
                                   warm_up=not args.no_warm_up) for _ in range(2)]
        for server in servers:
            stack.enter_context(server)
        off = first_chunks(servers[0].grpc_url, SENTENCE, args.requests, cache=False)
        first_chunks(servers[0].grpc_url, SENTENCE, 1)  # the text's audio into Redis
        time.sleep(0.5)  # the cache's write runs after the stream's end
        on = first_chunks(servers[1].grpc_url, SENTENCE, args.requests)
    headers = ["fresh server", "request 1 ms", "request 2 ms", f"request {args.requests} ms",
               f"1st / {args.requests}th"]
    rows = [_row("cache off (synthesized)", off), _row("cache on (Redis hit)", on)]
    print(text_table(headers, rows))
    command = " ".join(["python -m tts_triton.bench.first_request", *(argv if argv is not None else sys.argv[1:])])
    lines = [f"# A fresh server's first requests ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"`{command}`; warm-up before ready: {'off' if args.no_warm_up else 'on'}; text: {SENTENCE!r}.", "",
             "| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1),
             *("| " + " | ".join(r) + " |" for r in rows), ""]
    (args.out / "first-request.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
