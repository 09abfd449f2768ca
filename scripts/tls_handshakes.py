"""WebSocket handshakes over TLS against the gateway: how many a Python client waits out.

    .venv/bin/python scripts/tls_handshakes.py --connections 1000 [--tickets]

Starts the gateway in this process over TLS (a self-signed certificate for localhost, an API key, no Triton behind
it) and opens ``--connections`` stream-input WebSockets one after another with websockets' sync client (the one
the ElevenLabs SDK uses), each with a wrong key, so each gets its error and a close at once. Stops at the first
handshake left unanswered (for ``--timeout`` seconds, or until the connection ended) and prints how many went
through and the slowest. ``--tickets`` lets the server send TLS 1.3 session tickets, as it did before it stopped
(``gateway.server.uvicorn_config``). Run it beside load (e.g. two ``yes > /dev/null``): on an idle host neither
setting fails.
"""

from __future__ import annotations

import argparse
import ssl
import tempfile
import time
from pathlib import Path

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect

from tts_triton.gateway import GatewayConfig
from tts_triton.gateway.server import BackgroundGateway, self_signed
from tts_triton.processes.triton_server import free_port


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=20.0, help="seconds a handshake may take")
    p.add_argument("--tickets", action="store_true", help="let the server send TLS 1.3 session tickets")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tls = self_signed(Path(folder))
        trusting = ssl.create_default_context(cafile=str(tls.certfile))
        config = GatewayConfig(triton_endpoints=(f"127.0.0.1:{free_port()}",), api_keys=frozenset({"key"}))
        gateway = BackgroundGateway(config, host="localhost", port=free_port(), tls=tls)
        if args.tickets:
            gateway.settings.ssl.num_tickets = 2  # OpenSSL's default
        with gateway:
            url = gateway.url.replace("http", "ws", 1) + "/v1/text-to-speech/alloy/stream-input"
            slowest, done = 0.0, 0
            for done in range(args.connections):
                start = time.monotonic()
                try:
                    with connect(url, ssl=trusting, open_timeout=args.timeout,
                                 additional_headers={"xi-api-key": "wrong"}) as socket:
                        while True:
                            socket.recv(timeout=args.timeout)
                except ConnectionClosed:
                    slowest = max(slowest, time.monotonic() - start)
                except (TimeoutError, InvalidHandshake) as e:  # no answer, or the connection ended first
                    print(f"connection {done + 1}: {e} after {time.monotonic() - start:.1f} s")
                    break
            else:
                done = args.connections
    print(f"{done} of {args.connections} handshakes answered (tickets {'on' if args.tickets else 'off'}); "
          f"slowest {slowest * 1000:.0f} ms")
    return 0 if done == args.connections else 1


if __name__ == "__main__":
    raise SystemExit(main())
