"""``tts-triton bench-stream``: text streamed in at an LLM's pace, measured at any gateway and Triton.

    tts-triton bench-stream --gateway ws://localhost:8080 --triton localhost:8001 --out runs/stream
    tts-triton bench-stream --gateway wss://gpu-host:8443 --api-key KEY --cafile cert.pem --sessions 1,16,64,256 \\
        --triton gpu-host:8001 --out runs/stream-h200

Latency (``--gateway``): at each ``--sessions`` level, that many stream-input sessions at once, each sending
``--text`` token by token at ``--tokens-per-s``; per session, the seconds from sending the first sentence's
last token to receiving its first audio. The report names the most sessions whose p95 stays within
``--target-s``. Prosody (``--triton``): the same text synthesized whole and as the pieces the gateway cuts it
into (:class:`~tts_triton.text.incremental.TextCutter`, fed the same tokens and ``--schedule``); total durations,
and at each cut the pause between the words around it, whole against cut. Prints tables; writes ``report.md``
and ``report.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import ssl
import statistics
import sys
import time
from pathlib import Path

from tts_triton.client import AsyncTTSClient, Synthesis
from tts_triton.jobs.tables import markdown_table, text_table
from tts_triton.text.incremental import TextCutter

#: A paragraph such as an assistant says, several sentences with clauses, a number and an abbreviation.
TEXT = ("Thanks for waiting. I checked your order, and it shipped this morning from our warehouse in Denver. "
        "It should arrive by Friday, March 14, though storms in the Midwest could add a day. The tracking number "
        "is in your e-mail; you can also follow it on our website. Is there anything else I can help with?")


def tokens(text: str) -> list[str]:
    """LLM-like tokens: words with their leading space, punctuation apart."""
    return re.findall(r" ?\w+|\s?[^\w\s]", text)


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


async def _session(args: argparse.Namespace, url: str, context: ssl.SSLContext | None) -> float:
    """Seconds from the first sentence's last token sent to the first audio received."""
    import websockets

    headers = {"xi-api-key": args.api_key} if args.api_key else {}
    async with websockets.connect(url, ssl=context, additional_headers=headers, max_size=None) as socket:
        sent_end: float | None = None
        first: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        async def receive() -> None:
            async for raw in socket:
                message = json.loads(raw)
                if message.get("error"):
                    raise RuntimeError(message["message"])
                if message.get("audio") and base64.b64decode(message["audio"]) and not first.done():
                    first.set_result(time.perf_counter())

        reader = asyncio.ensure_future(receive())
        await socket.send(json.dumps({"text": " ", "generation_config": {"chunk_length_schedule": args.schedule}}))
        for token in tokens(args.text):
            await socket.send(json.dumps({"text": token}))
            if sent_end is None and token.strip() in (".", "!", "?"):
                sent_end = time.perf_counter()
            await asyncio.sleep(1 / args.tokens_per_s)
        await socket.send(json.dumps({"text": ""}))
        await reader
        if not first.done() or sent_end is None:
            raise RuntimeError("the session ended without audio")
        return first.result() - sent_end


async def _latency(args: argparse.Namespace) -> list[dict]:
    base = args.gateway.rstrip("/")
    url = f"{base}/v1/text-to-speech/{args.voice}/stream-input?output_format=pcm_24000&model_id=bench"
    context = ssl.create_default_context(cafile=args.cafile) if base.startswith("wss") else None
    rows = []
    for sessions in args.sessions:
        results = await asyncio.gather(*(_session(args, url, context) for _ in range(sessions)),
                                       return_exceptions=True)
        waits = [r for r in results if isinstance(r, float)]
        errors = [str(r) for r in results if not isinstance(r, float)]
        rows.append({"sessions": sessions, "failures": len(errors), "errors": sorted(set(errors))[:3],
                     "p50_s": _percentile(waits, 50) if waits else None,
                     "p95_s": _percentile(waits, 95) if waits else None})
        print(f"  {sessions} sessions: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def _gaps(result: Synthesis, spans: list[tuple[int, int]]) -> list[float]:
    """Seconds of pause between the last word before each cut and the first word after it."""
    gaps = []
    for cut in spans:
        before = [w for w in result.words if w.text_end <= cut[0]]
        after = [w for w in result.words if w.text_start >= cut[1]]
        gaps.append(after[0].start - before[-1].end if before and after else float("nan"))
    return gaps


async def _prosody(args: argparse.Namespace) -> dict:
    cutter, pieces = TextCutter(args.schedule), []
    for token in [" ", *tokens(args.text)]:
        pieces += cutter.feed(token)
    pieces += cutter.flush()
    async with AsyncTTSClient(args.triton, timeout=300) as client:
        whole = await client.synthesize(args.text, voice=args.triton_voice, return_words=True)
        parts = [await client.synthesize(p.text, voice=args.triton_voice, return_words=True) for p in pieces]
    offset = len(" ")  # the cutter was fed the first message's space before the text
    cut_gaps, whole_gaps = [], []
    for i in range(len(parts) - 1):
        left, right = parts[i], parts[i + 1]
        cut_gaps.append((left.duration - left.words[-1].end) + right.words[0].start
                        if left.words and right.words else float("nan"))
    seams = [(p.start - offset, p.start - offset) for p in pieces[1:]]
    whole_gaps = _gaps(whole, seams)
    return {"pieces": [p.source for p in pieces], "reasons": [p.reason for p in pieces],
            "whole_s": whole.duration, "cut_s": sum(p.duration for p in parts),
            "seams": [{"after": pieces[i].source.strip()[-24:], "whole_gap_s": w, "cut_gap_s": c}
                      for i, (w, c) in enumerate(zip(whole_gaps, cut_gaps, strict=True))]}


def _tables(result: dict, args: argparse.Namespace) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    lat_head = ["sessions", "first audio after 1st sentence p50 (ms)", "p95 (ms)", "failures"]
    lat_rows = [[str(r["sessions"]), "-" if r["p50_s"] is None else f"{r['p50_s'] * 1000:.0f}",
                 "-" if r["p95_s"] is None else f"{r['p95_s'] * 1000:.0f}", str(r["failures"])]
                for r in result.get("latency", [])]
    pro_head = ["seam after", "pause whole (ms)", "pause cut (ms)"]
    pro_rows = [[repr(s["after"]), f"{round(s['whole_gap_s'] * 1000):d}", f"{round(s['cut_gap_s'] * 1000):d}"]
                for s in result.get("prosody", {}).get("seams", [])]
    if "prosody" in result:
        p = result["prosody"]
        pro_rows.append(["total duration", f"{p['whole_s'] * 1000:.0f}", f"{p['cut_s'] * 1000:.0f} "
                         f"({(p['cut_s'] / p['whole_s'] - 1) * 100:+.1f} %)"])
    return lat_head, lat_rows, pro_head, pro_rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tts-triton bench-stream", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gateway", help="the gateway's base URL, ws:// or wss:// (latency)")
    p.add_argument("--triton", help="Triton's gRPC address (prosody of the cuts)")
    p.add_argument("--api-key", help="the gateway's API key (sent as xi-api-key)")
    p.add_argument("--cafile", help="CA certificate to trust for wss:// (e.g. a self-signed one)")
    p.add_argument("--voice", default="alloy", help="voice_id for the gateway (default %(default)s)")
    p.add_argument("--triton-voice", default=None, help="Triton preset for the prosody run (default: the server's)")
    p.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16],
                   help="concurrent sessions, comma-separated levels (default 1,4,16)")
    p.add_argument("--schedule", type=lambda s: [int(x) for x in s.split(",")], default=[50],
                   help="chunk_length_schedule, comma-separated (default 50, what the elevenlabs SDK sends)")
    p.add_argument("--tokens-per-s", type=float, default=16.0, help="pace of the text (default %(default)s)")
    p.add_argument("--target-s", type=float, default=0.5, help="p95 latency target (default %(default)s)")
    p.add_argument("--text", default=TEXT, help="the paragraph to stream")
    p.add_argument("--out", type=Path, required=True, help="folder for report.md and report.json")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.gateway and not args.triton:
        parser().error("give --gateway, --triton or both")
    result: dict = {"tokens_per_s": args.tokens_per_s, "target_s": args.target_s}
    if args.gateway:
        result["latency"] = asyncio.run(_latency(args))
        within = [r["sessions"] for r in result["latency"]
                  if not r["failures"] and r["p95_s"] is not None and r["p95_s"] <= args.target_s]
        result["sessions_within_target"] = max(within, default=0)
    if args.triton:
        result["prosody"] = asyncio.run(_prosody(args))
    lat_head, lat_rows, pro_head, pro_rows = _tables(result, args)
    command = "tts-triton bench-stream " + " ".join(argv if argv is not None else sys.argv[1:])
    report = [f"# Streamed text in, audio out\n\n`{command}`\n"]
    if lat_rows:
        print(text_table(lat_head, lat_rows))
        summary = (f"Most sessions with p95 <= {args.target_s:g} s at {args.tokens_per_s:g} tokens/s: "
                   f"{result['sessions_within_target']} (of the levels tried).")
        print(summary)
        report += [markdown_table(lat_head, lat_rows), "", summary, ""]
    if pro_rows:
        print(text_table(pro_head, pro_rows))
        report += [markdown_table(pro_head, pro_rows), ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text("\n".join(report))
    (args.out / "report.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
