"""Running the gateway: uvicorn serving :func:`~.app.create_app` (``tts-triton gateway``), over TLS when given a
certificate and its key (``wss://`` is what ElevenLabs' SDK connects to).

uvicorn runs :class:`~.protocol.GatewayProtocol` (its h11 protocol with a deadline on request heads and a
connection cap), the app bounds request bodies (:class:`~.deadline.BodyDeadline`), and uvicorn's own
``timeout_keep_alive`` closes idle kept-alive connections.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from .app import create_app
from .config import GatewayConfig
from .protocol import FrontDoor, GatewayProtocol, raise_fd_limit

log = logging.getLogger("tts_triton.gateway")

__all__ = ["BackgroundGateway", "TlsFiles", "self_signed", "serve", "uvicorn_config"]


@dataclass(frozen=True)
class TlsFiles:
    """A PEM certificate (chain) and its private key: the gateway then serves https:// and wss://."""

    certfile: Path
    keyfile: Path


def self_signed(folder: Path) -> TlsFiles:
    """A self-signed certificate for localhost and 127.0.0.1, valid for a day, and its key, written into ``folder``:
    for tests and local trials (clients trust it by its file). Needs ``cryptography`` (the test extra)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    files = TlsFiles(folder / "cert.pem", folder / "key.pem")
    files.certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return files


def uvicorn_config(config: GatewayConfig, *, host: str = "127.0.0.1", port: int = 8080,
                   log_level: str = "info", tls: TlsFiles | None = None) -> uvicorn.Config:
    """uvicorn's settings for one gateway process (one event loop: one shared Triton channel). WebSocket
    messages are bounded like request bodies; uvicorn pings each socket (its default, every 20 s). Raises this
    process's open-file limit to hold ``config.max_connections`` (lowering the cap, with a warning, where the
    hard limit is too low)."""
    app = create_app(config)
    cap = raise_fd_limit(config.max_connections)
    if cap < config.max_connections:
        log.warning("the open-file limit holds %d connections, not the %d asked for: the cap is %d",
                    cap, config.max_connections, cap)
    door = FrontDoor(config.header_timeout_s, cap, config.retry_after_s, app.state.gateway.metrics)
    settings = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on",
                              timeout_graceful_shutdown=10, timeout_keep_alive=config.keep_alive_s,  # type: ignore[arg-type]
                              http=functools.partial(GatewayProtocol, door=door),  # type: ignore[arg-type]
                              ws_max_size=config.max_body_bytes,
                              ssl_certfile=None if tls is None else str(tls.certfile),
                              ssl_keyfile=None if tls is None else str(tls.keyfile))
    if tls is not None:
        settings.load()  # makes settings.ssl (uvicorn's Server.run loads a config only once)
        # No TLS 1.3 session tickets: with them, the request of websockets' sync client (the ElevenLabs SDK's)
        # never reached the app on 1 in 5 to 225 handshakes on a loaded host, and the client waited until the head
        # deadline closed the connection; without them 0 in 1,000 (scripts/tls_handshakes.py)
        settings.ssl.num_tickets = 0
    return settings


def serve(config: GatewayConfig, *, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info",
          tls: TlsFiles | None = None) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's handlers: streams in flight get 10 s to finish); the gateway's own
    log lines (``tts_triton.*``: each session's summary among them) go to stderr at ``log_level``, as uvicorn's do."""
    settings = uvicorn_config(config, host=host, port=port, log_level=log_level, tls=tls)
    log_to_stderr(log_level)
    uvicorn.Server(settings).run()


def log_to_stderr(level: str) -> None:
    """Send the ``tts_triton`` loggers' records at ``level`` and above to stderr, formatted as uvicorn's (whose
    logging setup leaves every other logger without a handler: INFO lines were dropped)."""
    from uvicorn.logging import DefaultFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s"))
    root = logging.getLogger("tts_triton")
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False


class BackgroundGateway:
    """A gateway served by uvicorn in a thread of this process (tests, benchmarks); a context manager.

    ``start`` returns once the port accepts connections; ``stop`` lets streams in flight end and joins.
    """

    def __init__(self, config: GatewayConfig, *, host: str = "127.0.0.1", port: int,
                 tls: TlsFiles | None = None) -> None:
        self.url = f"{'http' if tls is None else 'https'}://{host}:{port}"
        self._server = uvicorn.Server(uvicorn_config(config, host=host, port=port, log_level="warning", tls=tls))
        self._thread = threading.Thread(target=self._server.run, name=f"gateway-{port}", daemon=True)

    @property
    def settings(self) -> uvicorn.Config:
        """uvicorn's settings of this gateway (:func:`uvicorn_config`), to adjust before :meth:`start`."""
        return self._server.config

    def start(self, timeout: float = 30.0) -> BackgroundGateway:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway at {self.url} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)

    def __enter__(self) -> BackgroundGateway:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
