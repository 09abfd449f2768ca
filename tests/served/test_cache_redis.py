"""The utterance cache over a real ``redis-server``: hits, what is never stored, fail-open on a dead or stalled
Redis."""

from __future__ import annotations

import asyncio
import time
import typing
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from cache_data import counted_cache, stream_chunks
from conftest import redis_asleep

from tts_triton.cache import CacheSettings, CacheUnavailable, RedisStore, UtteranceCache, entry
from tts_triton.errors import Cancelled
from tts_triton.processes.local_redis import LocalRedis
from tts_triton.serving.pipeline import Chunk
from tts_triton.serving.service import SynthesisRequest


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> typing.Iterator[LocalRedis]:
    server = LocalRedis(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


async def _source(chunks: list[Chunk], fail_after: int | None = None) -> AsyncIterator[Chunk]:
    for i, chunk in enumerate(chunks):
        if i == fail_after:
            raise RuntimeError("decoder failed")
        await asyncio.sleep(0)
        yield chunk


async def _run(cache: UtteranceCache, request: SynthesisRequest, chunks: list[Chunk], **kwargs: typing.Any
               ) -> list[Chunk]:
    fail_after = kwargs.pop("fail_after", None)
    out = [c async for c in cache.stream(request, lambda: _source(chunks, fail_after), **kwargs)]
    await cache.drain()
    return out


def test_a_repeat_is_a_hit_with_the_same_chunks(redis_server: LocalRedis) -> None:
    cache, meter = counted_cache(redis_server.url)
    chunks = stream_chunks(np.random.default_rng(3))
    request = SynthesisRequest(text="Please hold.")

    async def scenario() -> tuple[list[Chunk], list[Chunk]]:
        miss = await _run(cache, request, chunks)
        hit = await _run(cache, request, [])  # a hit never synthesizes
        return miss, hit

    miss, hit = asyncio.run(scenario())
    assert [c.audio.size for c in hit] == [c.audio.size for c in miss] == [c.audio.size for c in chunks]
    assert all(np.array_equal(entry.to_pcm16(h.audio), entry.to_pcm16(m.audio)) for h, m in zip(hit, miss, strict=True))
    assert meter.counts["lookup:miss"] == meter.counts["lookup:hit"] == meter.counts["write:stored"] == 1
    assert meter.counts["bytes:read"] == meter.counts["bytes:written"] > 0
    assert redis_server.client().ttl(cache.key(request)) > 0


def test_failed_stopped_and_oversized_syntheses_are_not_stored(redis_server: LocalRedis) -> None:
    cache, meter = counted_cache(redis_server.url, max_entry_bytes=10_000, max_text_chars=20)
    chunks = stream_chunks(np.random.default_rng(4))
    keys = redis_server.client()

    async def scenario() -> None:
        failed = SynthesisRequest(text="It failed.")
        with pytest.raises(RuntimeError):
            await _run(cache, failed, chunks, fail_after=2)
        stopped = SynthesisRequest(text="Stopped early.")
        await _run(cache, stopped, chunks, stopped=lambda: True)
        large = SynthesisRequest(text="Too much audio.")
        await _run(cache, large, stream_chunks(np.random.default_rng(5), (4096, 4096)))
        long_text = SynthesisRequest(text="A text longer than twenty characters.")
        await _run(cache, long_text, chunks)
        opted_out = SynthesisRequest(text="No cache.")
        await _run(cache, opted_out, chunks, use=False)
        for request in (failed, stopped, large, long_text, opted_out):
            assert not keys.exists(cache.key(request)), request.text

    asyncio.run(scenario())
    assert meter.counts["lookup:miss"] == 3 and meter.counts["lookup:skipped"] == 2
    assert meter.counts["write:too_large"] == 1 and meter.counts["write:stored"] == 0


def test_a_hit_stops_when_the_request_is_cancelled(redis_server: LocalRedis) -> None:
    cache, _ = counted_cache(redis_server.url)
    request = SynthesisRequest(text="Cancel me.")
    chunks = stream_chunks(np.random.default_rng(6))

    async def scenario() -> list[Chunk]:
        await _run(cache, request, chunks)
        got: list[Chunk] = []
        with pytest.raises(Cancelled):
            async for chunk in cache.stream(request, lambda: _source([]), stopped=lambda: len(got) >= 1):
                got.append(chunk)
        return got

    assert len(asyncio.run(scenario())) == 1


def test_no_redis_is_an_error_lookup_and_synthesis_goes_on(tmp_path: Path) -> None:
    dead = LocalRedis(tmp_path)  # never started: nothing listens on its port
    cache, meter = counted_cache(dead.url, backoff_s=30)
    chunks = stream_chunks(np.random.default_rng(7))

    async def scenario() -> float:
        start = time.perf_counter()
        for text in ("One.", "Two.", "Three."):
            assert len(await _run(cache, SynthesisRequest(text=text), chunks)) == len(chunks)
        return time.perf_counter() - start

    elapsed = asyncio.run(scenario())
    assert meter.counts["lookup:error"] == 3 and meter.counts["write:error"] == 3
    assert cache.store.failures == 1  # the first failure backed Redis off; the others did not try it
    assert elapsed < cache.settings.timeout_s + 1


def test_a_stalled_redis_costs_at_most_the_timeout(redis_server: LocalRedis) -> None:
    timeout = 0.2
    store = RedisStore(CacheSettings(redis_server.url, timeout_s=timeout))

    async def lookup() -> float:
        start = time.perf_counter()
        with pytest.raises(CacheUnavailable, match="unreachable"):
            await store.get("any")
        return time.perf_counter() - start

    with redis_asleep(redis_server, 2.0):
        elapsed = asyncio.run(lookup())
    # 0.5 s of slack for a loaded host; without the bound the lookup would wait out the sleep (1.5 s or more)
    assert timeout <= elapsed < timeout + 0.5
    assert store.retry_at > 0


def test_bench_cache_is_for_the_embedded_server(capsys: pytest.CaptureFixture[str]) -> None:
    from tts_triton.bench.sweep import parse

    assert parse(["--cache", "--repeat-ratio", "0", "0.8"]).cache
    with pytest.raises(SystemExit):
        parse(["--cache", "--url", "localhost:8001"])
    assert "--cache starts a Redis for the embedded server" in capsys.readouterr().err
