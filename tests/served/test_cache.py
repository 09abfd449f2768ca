"""The utterance cache without Triton: key derivation, the entry format, settings, and the cache over a
real ``redis-server`` (hits, what is never stored, fail-open on a dead or stalled Redis)."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import time
import types
import typing
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import redis_asleep

from tts_triton.cache import CacheSettings, CacheUnavailable, RedisStore, UtteranceCache, entry
from tts_triton.cache.deployment import cache_wanted
from tts_triton.cache.key import FORMAT_VERSION, canonical, digest, redis_key
from tts_triton.errors import Cancelled, InvalidInput
from tts_triton.processes.local_redis import LocalRedis
from tts_triton.serving.pipeline import Chunk
from tts_triton.serving.service import SynthesisRequest

DEPLOYMENT = {"checkpoint_sha256": "ab" * 32, "target": "onnxruntime-python", "model_config": {"n_mels": 80}}
RATE = 22050


def _test_values(name: str, hint: typing.Any) -> tuple[typing.Any, typing.Any]:
    """Two different values of a request field's type."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is list:
        a, b = _test_values(name, typing.get_args(hint)[0])
        return [a], [b]
    if dataclasses.is_dataclass(hint):
        fields = typing.get_type_hints(hint)
        pairs = {f: _test_values(f"{name}.{f}", h) for f, h in fields.items()}
        return hint(**{f: v[0] for f, v in pairs.items()}), hint(**{f: v[1] for f, v in pairs.items()})
    values = {str: ("a", "b"), bool: (False, True), int: (1, 2), float: (0.5, 1.5),
              np.ndarray: (np.zeros(4, np.float32), np.full(4, 0.25, np.float32))}
    if hint not in values:
        pytest.fail(f"SynthesisRequest.{name}: no test values for {hint!r}; add them to _test_values")
    return values[hint]


def test_every_request_field_is_in_the_key() -> None:
    hints = typing.get_type_hints(SynthesisRequest)
    base = SynthesisRequest(text="Hello there.")
    names = [field.name for field in dataclasses.fields(SynthesisRequest)]
    unkeyed = []
    for name in names:
        a, b = _test_values(name, hints[name])
        if digest(dataclasses.replace(base, **{name: a}), DEPLOYMENT) == digest(
                dataclasses.replace(base, **{name: b}), DEPLOYMENT):
            unkeyed.append(name)
    assert "text" in names and "voice" in names and len(names) == len(hints)
    assert unkeyed == [], f"SynthesisRequest fields that do not reach the cache key: {unkeyed}"


def test_key_covers_the_deployment_and_names_version_and_checkpoint() -> None:
    request = SynthesisRequest(text="Hello there.")
    assert digest(request, DEPLOYMENT) == digest(SynthesisRequest(text="Hello there."), dict(DEPLOYMENT))
    for change in ({"checkpoint_sha256": "cd" * 32}, {"target": "torch-cuda"}, {"model_config": {"n_mels": 64}}):
        assert digest(request, {**DEPLOYMENT, **change}) != digest(request, DEPLOYMENT), change
    key = redis_key("prod", DEPLOYMENT["checkpoint_sha256"], digest(request, DEPLOYMENT))
    assert key.startswith(f"prod:tts:v{FORMAT_VERSION}:{'ab' * 8}:")
    assert redis_key("staging", "ab" * 32, "x") != redis_key("prod", "ab" * 32, "x")


def test_key_covers_the_scope_and_the_serving_lexicon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each scope (the gateway's API keys) has entries of its own; an edit of the lexicon never reads the entries
    made before it (they were served for the cache's lifetime)."""
    from tts_triton.text.lexicon import LEXICON_ENV

    cache, _ = _cache("redis://unused")
    request = SynthesisRequest(text="Say zorblax.")
    assert cache.key(request) == cache.key(request, "") != cache.key(request, "a") != cache.key(request, "b")
    lexicon = tmp_path / "lexicon.tsv"
    monkeypatch.setenv(LEXICON_ENV, str(lexicon))
    lexicon.write_text("zorblax\tcat\n", encoding="utf-8")
    cat = cache.key(request)
    lexicon.write_text("zorblax\tdog\n", encoding="utf-8")
    os.utime(lexicon, ns=(time.time_ns() + 10**9,) * 2)  # a new modification time, as an edit gives
    assert cache.key(request) != cat


def test_cache_scope_parameter() -> None:
    from tts_triton.cache.deployment import cache_scope
    from tts_triton.core.contract import CACHE_SCOPE_PARAMETER as NAME

    assert cache_scope(None) == "" and cache_scope({NAME: "k1"}) == "k1" and cache_scope(f'{{"{NAME}": "k"}}') == "k"
    for bad in (5, "x" * 129):
        with pytest.raises(InvalidInput, match=NAME):
            cache_scope({NAME: bad})


def test_canonical_arrays_by_content_and_unknown_types_refused() -> None:
    a = np.arange(6, dtype=np.float32)
    assert canonical(a) == canonical(a.copy()) != canonical(a.reshape(2, 3)) != canonical(a.astype(np.float64))
    assert canonical(float("nan")) == "nan"
    with pytest.raises(TypeError, match="cannot put a object"):
        canonical(object())


def _chunks(rng: np.random.Generator, sizes: tuple[int, ...] = (2048, 4096, 1024)) -> list[Chunk]:
    return [Chunk(audio=rng.uniform(-1.1, 1.1, n).astype(np.float32),
                  mel=rng.standard_normal((n // 256, 80)).astype(np.float32), sentence=i // 2)
            for i, n in enumerate(sizes)]


def test_entry_round_trip_keeps_chunks_pcm16_exact() -> None:
    chunks = _chunks(np.random.default_rng(0))
    data = entry.encode(chunks, key="k", checkpoint_sha256="c", sample_rate=RATE)
    back = entry.decode(data, key="k", checkpoint_sha256="c", sample_rate=RATE)
    assert len(back) == len(chunks)
    for original, restored in zip(chunks, back, strict=True):
        assert restored.audio.dtype == np.float32
        np.testing.assert_array_equal(entry.to_pcm16(restored.audio), entry.to_pcm16(original.audio))
        np.testing.assert_array_equal(restored.audio, entry.from_pcm16(entry.to_pcm16(original.audio)))
        assert restored.mel.dtype == np.float32 and restored.mel.shape == original.mel.shape
        np.testing.assert_array_equal(restored.mel, original.mel.astype(np.float16).astype(np.float32))
        for f in entry.chunk_fields():
            if not isinstance(getattr(original, f.name), np.ndarray):
                assert getattr(restored, f.name) == getattr(original, f.name), f.name
    assert len(data) < sum(entry.stored_size(c) for c in chunks) + 1024


@pytest.mark.parametrize("change", [{"key": "other"}, {"checkpoint_sha256": "d"}, {"sample_rate": 16000}])
def test_entry_for_another_key_or_deployment_is_refused(change: dict) -> None:
    data = entry.encode(_chunks(np.random.default_rng(1)), key="k", checkpoint_sha256="c", sample_rate=RATE)
    with pytest.raises(entry.EntryError, match="differ"):
        entry.decode(data, **{"key": "k", "checkpoint_sha256": "c", "sample_rate": RATE, **change})


def test_damaged_entries_are_refused() -> None:
    data = entry.encode(_chunks(np.random.default_rng(2)), key="k", checkpoint_sha256="c", sample_rate=RATE)
    other_version = data.replace(f'"version":{FORMAT_VERSION}'.encode(), b'"version":9')
    for bad in (b"", b"GIF89a", data[:-2], data[:20], other_version):
        with pytest.raises(entry.EntryError):
            entry.decode(bad, key="k", checkpoint_sha256="c", sample_rate=RATE)


def test_every_chunk_field_survives_an_entry() -> None:
    """Each field of the stream's Chunk (e.g. its words) is stored and rebuilt: a new field needs no cache edit."""
    hints = typing.get_type_hints(Chunk)
    values = {f.name: _test_values(f.name, hints[f.name])[1] for f in entry.chunk_fields()}
    values["mel"] = np.full((3, 80), 0.5, np.float32)
    chunk = Chunk(audio=np.zeros(512, np.float32), **values)
    back = entry.decode(entry.encode([chunk], key="k", checkpoint_sha256="c", sample_rate=RATE), key="k",
                        checkpoint_sha256="c", sample_rate=RATE)[0]
    assert {"mel", "sentence", "words"} <= set(values)
    lost = [name for name, value in values.items()
            if not (np.array_equal(getattr(back, name), value) if isinstance(value, np.ndarray)
                    else getattr(back, name) == value)]
    assert lost == [], f"Chunk fields not rebuilt from an entry: {lost}"


@dataclass(frozen=True)
class _Word:
    text: str
    start: int


def test_chunk_metadata_of_dataclasses_is_rebuilt_from_type_hints() -> None:
    words = [_Word("hi", 0), _Word("there", 3)]
    blobs: list[bytes] = []
    stored = entry._to_json(words, blobs)
    assert blobs == [] and entry._from_json(list[_Word], stored) == words
    assert entry._from_json(list[_Word] | None, None) is None
    assert entry._from_json(dict[str, list[_Word]], {"w": stored}) == {"w": words}
    ids = np.arange(5, dtype=np.int64)
    ref = entry._to_json({"ids": ids}, blobs)
    np.testing.assert_array_equal(entry._from_json(dict[str, np.ndarray], ref, b"".join(blobs))["ids"], ids)


def test_settings_from_and_to_env(tmp_path: Path) -> None:
    assert CacheSettings.from_env({}) is None
    settings = CacheSettings("rediss://cache.internal:6380/2", namespace="eu", ttl_s=60, timeout_s=0.05)
    assert CacheSettings.from_env(settings.to_env()) == settings
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    assert CacheSettings("redis://h:1/0", redis_password_file=str(secret)).password() == "s3cret"
    assert CacheSettings("redis://h:1/0", redis_password="p").password() == "p"
    with pytest.raises(ValueError, match="scheme"):
        CacheSettings("http://h:1/0")


def test_opt_out_parameter() -> None:
    assert cache_wanted(None) and cache_wanted("{}") and cache_wanted('{"cache": true}')
    assert not cache_wanted('{"cache": false}') and not cache_wanted({"cache": "false"})
    with pytest.raises(InvalidInput, match="cache: request parameter must be true or false"):
        cache_wanted('{"cache": 3}')


def test_serve_rejects_a_bad_redis_url(capsys: pytest.CaptureFixture[str]) -> None:
    from tts_triton.cli import main

    assert main(["serve", "--redis-url", "http://localhost:6379", "--health-interval", "0"]) == 1
    err = capsys.readouterr().err
    assert "cache: redis URL 'http://localhost:6379': scheme must be one of redis, rediss, unix" in err


# --- The cache over a real Redis. ---

class CountingMeter:
    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    def lookup(self, outcome: str) -> None:
        self.counts[f"lookup:{outcome}"] += 1

    def bytes(self, direction: str, count: int) -> None:
        self.counts[f"bytes:{direction}"] += count

    def write(self, outcome: str) -> None:
        self.counts[f"write:{outcome}"] += 1


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> typing.Iterator[LocalRedis]:
    server = LocalRedis(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


def _cache(url: str, **overrides: typing.Any) -> tuple[UtteranceCache, CountingMeter]:
    meter = CountingMeter()
    settings = CacheSettings(url, namespace=f"test-{time.monotonic_ns()}", **overrides)
    return UtteranceCache(settings, DEPLOYMENT, sample_rate=RATE, meter=meter), meter


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
    cache, meter = _cache(redis_server.url)
    chunks = _chunks(np.random.default_rng(3))
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
    cache, meter = _cache(redis_server.url, max_entry_bytes=10_000, max_text_chars=20)
    chunks = _chunks(np.random.default_rng(4))
    keys = redis_server.client()

    async def scenario() -> None:
        failed = SynthesisRequest(text="It failed.")
        with pytest.raises(RuntimeError):
            await _run(cache, failed, chunks, fail_after=2)
        stopped = SynthesisRequest(text="Stopped early.")
        await _run(cache, stopped, chunks, stopped=lambda: True)
        large = SynthesisRequest(text="Too much audio.")
        await _run(cache, large, _chunks(np.random.default_rng(5), (4096, 4096)))
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
    cache, _ = _cache(redis_server.url)
    request = SynthesisRequest(text="Cancel me.")
    chunks = _chunks(np.random.default_rng(6))

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
    cache, meter = _cache(dead.url, backoff_s=30)
    chunks = _chunks(np.random.default_rng(7))

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
