"""``tts_triton.bench.clients``: how many client processes a level gets, how its streams, requests and new texts are
shared out, and how the processes' records are merged onto one clock (a stand-in pool returns what processes would:
pure logic; the bench's run against the real server in test_bench spawns real ones)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tts_triton.bench.clients import SplitLevel, client_processes
from tts_triton.bench.stats import LevelResult, summarize
from tts_triton.bench.workload import RequestRecord, Workload


def test_one_process_up_to_32_streams_then_one_per_32_within_a_quarter_of_the_cores() -> None:
    assert [client_processes(c, cpus=16) for c in (1, 8, 32, 33, 64, 128, 256)] == [1, 1, 1, 2, 2, 4, 4]
    assert [client_processes(c, cpus=2) for c in (1, 64, 256)] == [1, 1, 1]  # a small host keeps one


def test_processes_drawing_beside_a_workload_never_draw_the_same_new_text() -> None:
    parent = Workload(1.0, code_start=0)
    children = [Workload(0.0, seed=i, code_start=start, code_stride=stride)
                for i, (start, stride) in enumerate(parent.beside(3))]
    texts = [child.next()[1] for child in children for _ in range(5)]
    assert len(set(texts)) == 15
    parent.skip_codes(3 * 5)
    assert parent.next()[1] not in texts  # nothing completed yet: a new text, after the children's codes


class StandInPool:
    """Answers each part as a client process would: its level started ``delays[i]`` after the common start, with one
    completed request at 0.1 s (first chunk 0.05 s later, 1 s of audio) and a load held ``loaded[i]`` seconds."""

    def __init__(self, delays: Sequence[float], loaded: Sequence[float]) -> None:
        self.processes = len(delays)
        self.delays, self.loaded = delays, loaded
        self.parts: list = []

    async def run(self, parts: Sequence) -> list[tuple[float, LevelResult]]:
        self.parts = list(parts)
        results = []
        for part, delay, loaded in zip(parts, self.delays, self.loaded, strict=True):
            record = RequestRecord(index=0, start=0.1, text=f"text of {part.label}", first_chunk=0.15, end=0.5,
                                   audio_seconds=1.0, audio_when_loaded=1.0)
            results.append((part.start_at + delay, LevelResult(part.concurrency, [record], loaded)))
        return results


def test_a_split_level_shares_its_streams_and_merges_records_onto_the_common_start() -> None:
    pool = StandInPool(delays=(0.0, 0.2, 0.5), loaded=(3.0, 3.0, 2.0))
    workload = Workload()
    level = SplitLevel(pool, "localhost:8001", {"speed": 1.5}, workload, concurrency=8, requests=10, seconds=2.0,
                       grace=5.0, processes=3)
    result = asyncio.run(level.run())
    assert [p.concurrency for p in pool.parts] == [3, 3, 2] and [p.requests for p in pool.parts] == [4, 3, 3]
    assert {p.controls["speed"] for p in pool.parts} == {1.5} and len({p.start_at for p in pool.parts}) == 1
    assert sorted(r.start for r in result.records) == pytest.approx([0.1, 0.3, 0.6])
    assert sorted(r.first_chunk for r in result.records) == pytest.approx([0.15, 0.35, 0.65])
    assert result.loaded_seconds == pytest.approx(3.2)  # the second process's load ended last
    assert (result.clients, result.concurrency) == (3, 8)
    assert summarize(result).audio_per_second == pytest.approx(3.0 / 3.2)
    assert len(workload.known()) == 3  # their completed texts may be repeated by later levels


def test_a_split_level_needs_a_process_per_stream_at_least_and_a_pool_that_large() -> None:
    with pytest.raises(ValueError, match="3 client processes for 2 streams"):
        SplitLevel(StandInPool((0, 0, 0), (1, 1, 1)), "u", {}, Workload(), 2, None, 1.0, 1.0, processes=3)
    with pytest.raises(ValueError, match="in a pool of 2"):
        SplitLevel(StandInPool((0, 0), (1, 1)), "u", {}, Workload(), 8, None, 1.0, 1.0, processes=3)
