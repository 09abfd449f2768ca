"""The gateway's Prometheus metrics, in a registry of its own (one per app), per Triton endpoint too."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tts_triton.client.balancer import Balancer

__all__ = ["ENDPOINT_METRICS", "STREAMS_IN_FLIGHT", "GatewayMetrics"]

#: The gauge the Helm chart's HPA scales the gateway on.
STREAMS_IN_FLIGHT = "tts_gateway_streams_in_flight"
#: Per Triton endpoint (label ``endpoint``, its address): streams in flight, whether it takes new streams,
#: streams started, ejections, and requests that failed there before any audio and were sent again.
ENDPOINT_METRICS = {
    "in_flight": "tts_gateway_endpoint_streams_in_flight",
    "usable": "tts_gateway_endpoint_up",
    "started": "tts_gateway_endpoint_streams",
    "ejections": "tts_gateway_endpoint_ejections",
    "retries": "tts_gateway_endpoint_retries",
}
#: First-byte buckets (seconds): a few ms on a GPU host up to seconds on a loaded CPU.
_FIRST_BYTE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class GatewayMetrics:
    """Requests by outcome and format, first-byte latency, bytes sent, streams in flight; connections open,
    refused over the cap, and cut for a slow head or body; when given the client's ``balancer``, its endpoints'
    state."""

    def __init__(self, balancer: Balancer | None = None) -> None:
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
        self.refusals = Counter("tts_gateway_refusals", "Requests and sessions refused by a limit, by limit "
                                "(streams, key_streams, key_rate, audio_seconds, input_chars, body_bytes, sessions, "
                                "key_sessions, keyless_sockets).", ["limit"], registry=self.registry)
        if balancer is not None:
            self.registry.register(_EndpointCollector(balancer))

    def exposition(self) -> bytes:
        """The text exposition format of every metric."""
        return generate_latest(self.registry)


class _EndpointCollector(Collector):
    """The balancer's endpoints, read at each scrape."""

    def __init__(self, balancer: Balancer) -> None:
        self.balancer = balancer

    def collect(self) -> Iterator[Metric]:
        names = ENDPOINT_METRICS
        families = {
            "in_flight": GaugeMetricFamily(names["in_flight"], "Streams in flight to a Triton endpoint.",
                                           labels=["endpoint"]),
            "usable": GaugeMetricFamily(names["usable"], "1 while a Triton endpoint takes new streams (not ejected "
                                                         "or cooling down after a busy answer).", labels=["endpoint"]),
            "started": CounterMetricFamily(names["started"], "Streams sent to a Triton endpoint.", labels=["endpoint"]),
            "ejections": CounterMetricFamily(names["ejections"], "Times a Triton endpoint was ejected (failed to "
                                                                 "connect, unready, draining, failing).",
                                             labels=["endpoint"]),
            "retries": CounterMetricFamily(names["retries"], "Requests that failed at a Triton endpoint before any "
                                                             "audio and were sent again.", labels=["endpoint"]),
        }
        for state in self.balancer.snapshot():
            for key, family in families.items():
                family.add_metric([state.address], float(getattr(state, key)))
        yield from families.values()
