"""Metric updates in batches (tts_triton.model_instance.metrics): sums sent in one update each, within the interval
or at once on flush, never after close."""

from __future__ import annotations

import threading
import time

from waiting import wait_until

from tts_triton.model_instance.metrics import MetricBatch


class Counter:
    """A metric that records each update it is sent (each one a round trip to the server in Triton)."""

    def __init__(self) -> None:
        self.updates: list[float] = []

    def increment(self, value: float) -> None:
        self.updates.append(value)


def test_increments_are_summed_into_one_update_per_metric_on_flush() -> None:
    batch, requests, active = MetricBatch(every=60.0), Counter(), Counter()
    for _ in range(3):
        batch.add(requests, 1)
        batch.add(active, 1)
    batch.add(active, -3)
    assert requests.updates == [] and active.updates == []
    batch.flush()
    assert requests.updates == [3.0] and active.updates == []  # a zero sum is no update
    batch.flush()
    assert requests.updates == [3.0]


def test_pending_sums_go_out_within_the_interval_without_a_flush() -> None:
    batch, counter = MetricBatch(every=0.05), Counter()
    batch.add(counter, 2.5)
    batch.add(counter, 0.5)
    wait_until(lambda: counter.updates == [3.0], 5, "the summed update")
    batch.add(counter, 1)  # a new interval starts with the next increment
    wait_until(lambda: counter.updates == [3.0, 1.0], 5, "the next interval's update")


def test_close_sends_what_is_pending_and_starts_no_timer_after() -> None:
    batch, counter = MetricBatch(every=0.01), Counter()
    batch.add(counter, 1)
    batch.close()
    assert counter.updates == [1.0]
    batch.add(counter, 1)
    time.sleep(0.1)
    assert counter.updates == [1.0]


def test_close_returns_after_a_flush_under_way() -> None:
    """No update may follow close(): the model deletes its metrics next."""
    batch, started, release = MetricBatch(every=60.0), threading.Event(), threading.Event()

    class Slow(Counter):
        def increment(self, value: float) -> None:
            started.set()
            release.wait(5)
            super().increment(value)

    slow = Slow()
    batch.add(slow, 1)
    flushing = threading.Thread(target=batch.flush)
    flushing.start()
    assert started.wait(5)
    closing = threading.Thread(target=batch.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waiting for the flush under way
    release.set()
    closing.join(5)
    flushing.join(5)
    assert not closing.is_alive() and slow.updates == [1.0]


class Family:
    """``pb_utils.MetricFamily``'s shape: ``Metric(labels=...)`` gives one counter per label set."""

    def __init__(self, name: str, description: str) -> None:
        self.name, self.counters = name, {}

    def Metric(self, labels: dict[str, str]) -> Counter:  # noqa: N802 - pb_utils' name
        return self.counters.setdefault(tuple(sorted(labels.items())), Counter())


def test_cache_counts_go_through_the_batch_the_bls_passes() -> None:
    from tts_triton.cache.metrics import CounterMeter
    from tts_triton.core.contract import CACHE_BYTES_METRIC, CACHE_LOOKUPS_METRIC

    batch = MetricBatch(every=60.0)
    meter = CounterMeter(Family, "tts", batch.add)
    for _ in range(3):
        meter.lookup("hit")
        meter.bytes("read", 100)
    hits, read = meter.counters[CACHE_LOOKUPS_METRIC, "hit"], meter.counters[CACHE_BYTES_METRIC, "read"]
    assert hits.updates == read.updates == []
    batch.flush()
    assert hits.updates == [3.0] and read.updates == [300.0]
    direct = CounterMeter(Family, "tts")  # no batch: each count is sent as it happens
    direct.lookup("miss")
    direct.lookup("miss")
    assert direct.counters[CACHE_LOOKUPS_METRIC, "miss"].updates == [1, 1]
