"""Counting cache outcomes into Prometheus counters of the metric names in :mod:`tts_triton.cache.settings`.

Triton-free: the counters come from a ``family(name, description)`` factory whose result has
``Metric(labels=...)`` returning objects with ``increment(n)``, the shape of ``pb_utils.MetricFamily``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tts_triton.cache.settings import BYTE_DIRECTIONS, LOOKUP_OUTCOMES, WRITE_OUTCOMES
from tts_triton.core.contract import CACHE_BYTES_METRIC, CACHE_LOOKUPS_METRIC, CACHE_WRITES_METRIC

#: Metric name -> (description, label name, label values).
METRICS = {
    CACHE_LOOKUPS_METRIC: ("Utterance cache lookups by outcome", "outcome", LOOKUP_OUTCOMES),
    CACHE_BYTES_METRIC: ("Utterance cache entry bytes read from and written to Redis", "direction", BYTE_DIRECTIONS),
    CACHE_WRITES_METRIC: ("Utterance cache entry writes by outcome", "outcome", WRITE_OUTCOMES),
}


class CounterMeter:
    """A :class:`~tts_triton.cache.utterance.CacheMeter` over counters labelled ``model`` plus one label each."""

    def __init__(self, family: Callable[[str, str], Any], model: str) -> None:
        self.families = {name: family(name, description) for name, (description, _, _) in METRICS.items()}
        self.counters = {
            (name, value): self.families[name].Metric(labels={"model": model, label: value})
            for name, (_, label, values) in METRICS.items() for value in values
        }

    def lookup(self, outcome: str) -> None:
        self.counters[CACHE_LOOKUPS_METRIC, outcome].increment(1)

    def bytes(self, direction: str, count: int) -> None:
        self.counters[CACHE_BYTES_METRIC, direction].increment(count)

    def write(self, outcome: str) -> None:
        self.counters[CACHE_WRITES_METRIC, outcome].increment(1)

    def close(self) -> None:
        """Drop the counters, then their families (a metric must go before its family)."""
        self.counters.clear()
        self.families.clear()
