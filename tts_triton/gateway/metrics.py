"""The gateway's Prometheus metrics, in a registry of its own (one per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["STREAMS_IN_FLIGHT", "GatewayMetrics"]

#: The gauge the Helm chart's HPA scales the gateway on.
STREAMS_IN_FLIGHT = "tts_gateway_streams_in_flight"
#: First-byte buckets (seconds): a few ms on a GPU host up to seconds on a loaded CPU.
_FIRST_BYTE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class GatewayMetrics:
    """Requests by outcome and format, first-byte latency, bytes sent, streams in flight; connections open,
    refused over the cap, and cut for a slow head or body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("tts_gateway_requests", "Speech requests by outcome and response format.",
                                ["outcome", "format"], registry=self.registry)
        self.first_byte = Histogram("tts_gateway_first_byte_seconds",
                                    "Seconds from a request's arrival to its first audio byte.", ["format"],
                                    buckets=_FIRST_BYTE_BUCKETS, registry=self.registry)
        self.bytes_out = Counter("tts_gateway_bytes", "Audio bytes sent, by response format.", ["format"],
                                 registry=self.registry)
        self.in_flight = Gauge(STREAMS_IN_FLIGHT, "Speech streams being synthesized now.", registry=self.registry)
        self.connections = Gauge("tts_gateway_connections", "HTTP connections open now.", registry=self.registry)
        self.refused = Counter("tts_gateway_connections_refused", "Connections answered 503 over the connection cap.",
                               registry=self.registry)
        self.slow_clients = Counter("tts_gateway_slow_clients",
                                    "Requests cut because their head or body did not arrive in time.", ["part"],
                                    registry=self.registry)

    def exposition(self) -> bytes:
        """The text exposition format of every metric."""
        return generate_latest(self.registry)
