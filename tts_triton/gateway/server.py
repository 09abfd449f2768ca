"""Running the gateway: uvicorn serving :func:`~.app.create_app` (``tts-triton gateway``)."""

from __future__ import annotations

import uvicorn

from .app import GatewayConfig, create_app

__all__ = ["serve", "uvicorn_config"]


def uvicorn_config(config: GatewayConfig, *, host: str = "127.0.0.1", port: int = 8080,
                   log_level: str = "info") -> uvicorn.Config:
    """uvicorn's settings for one gateway process (one event loop: one shared Triton channel)."""
    return uvicorn.Config(create_app(config), host=host, port=port, log_level=log_level, access_log=False,
                          lifespan="on", timeout_graceful_shutdown=10)


def serve(config: GatewayConfig, *, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's handlers: streams in flight get 10 s to finish)."""
    uvicorn.Server(uvicorn_config(config, host=host, port=port, log_level=log_level)).run()
