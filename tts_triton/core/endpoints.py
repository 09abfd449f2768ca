"""Where a tts-triton server listens by default: Triton's own default ports, and the addresses that clients,
commands and health checks use when given none."""

from __future__ import annotations

HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
#: host:port of a server on this machine (what ``tts-triton serve`` starts with its defaults).
DEFAULT_GRPC_URL = f"localhost:{GRPC_PORT}"
DEFAULT_HTTP_URL = f"localhost:{HTTP_PORT}"
DEFAULT_METRICS_URL = f"http://localhost:{METRICS_PORT}/metrics"
