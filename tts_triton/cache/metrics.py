"""Counting cache outcomes into Prometheus counters of the metric names in :mod:`tts_triton.cache.settings`.

Triton-free: the counters come from a ``family(name, description)`` factory whose result has
``Metric(labels=...)`` returning objects with ``increment(n)``, the shape of ``pb_utils.MetricFamily``. Each count
goes through ``add(counter, n)``: at once by default, or summed and sent later (the BLS passes
:meth:`~tts_triton.model_instance.metrics.MetricBatch.add`, since an increment is a round trip to the server).
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


def _increment(counter: Any, count: float) -> None:
    counter.increment(count)


class CounterMeter:
    """A :class:`~tts_triton.cache.utterance.CacheMeter` over counters labelled ``model`` plus one label each."""

    def __init__(self, family: Callable[[str, str], Any], model: str,
                 add: Callable[[Any, float], None] | None = None) -> None:
        self.add = add or _increment
        self.families = {name: family(name, description) for name, (description, _, _) in METRICS.items()}
        self.counters = {
            (name, value): self.families[name].Metric(labels={"model": model, label: value})
            for name, (_, label, values) in METRICS.items() for value in values
        }

    def lookup(self, outcome: str) -> None:
        self.add(self.counters[CACHE_LOOKUPS_METRIC, outcome], 1)

    def bytes(self, direction: str, count: int) -> None:
        self.add(self.counters[CACHE_BYTES_METRIC, direction], count)

    def write(self, outcome: str) -> None:
        self.add(self.counters[CACHE_WRITES_METRIC, outcome], 1)

    def close(self) -> None:
        """Drop the counters, then their families (a metric must go before its family); counts passed to a deferring
        ``add`` must have been sent before."""
        self.counters.clear()
        self.families.clear()
