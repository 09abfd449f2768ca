"""The utterance cache without Triton or Redis: key derivation, the entry format, settings (over a real
``redis-server``: tests/served/test_cache_redis.py)."""

from __future__ import annotations

import dataclasses
import os
import time
import types
import typing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cache_data import DEPLOYMENT, RATE, counted_cache, stream_chunks

from tts_triton.cache import CacheSettings, entry
from tts_triton.cache.deployment import cache_wanted
from tts_triton.cache.key import FORMAT_VERSION, canonical, digest, redis_key
from tts_triton.errors import InvalidInput
from tts_triton.serving.pipeline import Chunk
from tts_triton.serving.service import SynthesisRequest


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

    cache, _ = counted_cache("redis://unused")
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


def test_entry_round_trip_keeps_chunks_pcm16_exact() -> None:
    chunks = stream_chunks(np.random.default_rng(0))
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
    assert [c.last for c in back] == [False] * (len(back) - 1) + [True]  # a hit's stream ends with its last chunk


@pytest.mark.parametrize("change", [{"key": "other"}, {"checkpoint_sha256": "d"}, {"sample_rate": 16000}])
def test_entry_for_another_key_or_deployment_is_refused(change: dict) -> None:
    data = entry.encode(stream_chunks(np.random.default_rng(1)), key="k", checkpoint_sha256="c", sample_rate=RATE)
    with pytest.raises(entry.EntryError, match="differ"):
        entry.decode(data, **{"key": "k", "checkpoint_sha256": "c", "sample_rate": RATE, **change})


def test_damaged_entries_are_refused() -> None:
    data = entry.encode(stream_chunks(np.random.default_rng(2)), key="k", checkpoint_sha256="c", sample_rate=RATE)
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
