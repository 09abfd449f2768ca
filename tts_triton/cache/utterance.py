"""The utterance cache around one request's synthesis: look up, stream a hit, or synthesize and store.

The key covers the request, the deployment, the serving lexicon's digest (an edit of the lexicon never serves audio
of the old one) and the request's scope (:data:`~tts_triton.core.contract.CACHE_SCOPE_PARAMETER`: the gateway sends
one per API key, so that one key cannot tell from a hit's speed what another key had spoken).

Contract of :meth:`UtteranceCache.stream`:
- a hit streams the stored chunks in order, like a miss (stopping with :class:`Cancelled` once
  ``stopped()``); the audio is the miss's as 16-bit PCM;
- a miss (or any Redis failure: fail-open) streams the synthesis as it comes, and only when it ended by
  itself, ``stopped()`` is still false and the entry is within ``max_entry_bytes`` is the entry written,
  in a task of its own after the last chunk: the request never waits for the write;
- concurrent misses of one key are not coalesced: each synthesizes, the last write wins (the values are
  equal), so a stream never waits on another stream's progress or cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from tts_triton.cache import entry
from tts_triton.cache.key import digest, redis_key
from tts_triton.cache.settings import CacheSettings
from tts_triton.cache.store import CacheUnavailable, RedisStore
from tts_triton.errors import Cancelled
from tts_triton.serving.pipeline import Chunk
from tts_triton.text import lexicon


class CacheMeter(Protocol):
    """Where the cache counts (the BLS: Prometheus counters; see :mod:`tts_triton.cache.settings`)."""

    def lookup(self, outcome: str) -> None: ...

    def bytes(self, direction: str, count: int) -> None: ...

    def write(self, outcome: str) -> None: ...


class UtteranceCache:
    """Key derivation plus Redis for one serving model. ``deployment`` is everything about the server
    that determines audio (checkpoint digest under ``"checkpoint_sha256"``, voice bank, target, model and
    streaming settings); it goes into every key."""

    def __init__(self, settings: CacheSettings, deployment: Mapping[str, Any], *, sample_rate: int,
                 meter: CacheMeter, log: Callable[[str], None] = lambda message: None,
                 store: RedisStore | None = None) -> None:
        self.settings = settings
        self.deployment = dict(deployment)
        self.checkpoint_sha256 = str(deployment["checkpoint_sha256"])
        self.sample_rate = sample_rate
        self.meter = meter
        self.log = log
        self.store = store or RedisStore(settings)
        self._writes: set[asyncio.Task] = set()

    def key(self, request: Any, scope: str = "") -> str:
        """The Redis key of a parsed request in this deployment, with the serving lexicon and ``scope``."""
        current = lexicon.current()
        context = {"lexicon": current.digest if current is not None else None, "scope": scope}
        return redis_key(self.settings.namespace, self.checkpoint_sha256, digest(request, self.deployment, context))

    def cacheable(self, request: Any) -> bool:
        """Whether a request is within the bounds worth a lookup (its text length)."""
        return len(request.text) <= self.settings.max_text_chars

    async def stream(self, request: Any, synthesize: Callable[[], AsyncIterator[Chunk]], *,
                     use: bool = True, stopped: Callable[[], bool] = lambda: False,
                     scope: str = "") -> AsyncIterator[Chunk]:
        """The request's chunks from Redis or from ``synthesize()`` (see the module docstring); ``use=False``
        (the request opted out) skips the cache; ``scope``: whose entries it reads and writes."""
        if not use or not self.cacheable(request):
            self.meter.lookup("skipped")
            async with contextlib.aclosing(synthesize()) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        key = self.key(request, scope)
        hit = await self._lookup(key)
        if hit is not None:
            for chunk in hit:
                if stopped():
                    raise Cancelled
                yield chunk
            return
        kept: list[Chunk] | None = []
        size = 0
        async with contextlib.aclosing(synthesize()) as chunks:
            async for chunk in chunks:
                if kept is not None:
                    kept.append(chunk)
                    size += entry.stored_size(chunk)
                    if size > self.settings.max_entry_bytes:
                        kept = None  # over the bound: stop holding the audio
                yield chunk
        if stopped():  # cut off without an exception (an in-band stop): not the whole utterance
            return
        if kept is None:
            self.meter.write("too_large")
            return
        task = asyncio.get_running_loop().create_task(self._write(key, kept))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _lookup(self, key: str) -> list[Chunk] | None:
        try:
            data = await self.store.get(key)
        except CacheUnavailable as err:
            self.meter.lookup("error")
            self.log(f"cache lookup failed, synthesizing: {err}")
            return None
        if data is None:
            self.meter.lookup("miss")
            return None
        try:
            chunks = entry.decode(data, key=key, checkpoint_sha256=self.checkpoint_sha256,
                                  sample_rate=self.sample_rate)
        except entry.EntryError as err:
            self.meter.lookup("error")
            self.log(f"cache entry {key} unusable, synthesizing: {err}")
            return None
        self.meter.lookup("hit")
        self.meter.bytes("read", len(data))
        return chunks

    async def _write(self, key: str, chunks: list[Chunk]) -> None:
        data = entry.encode(chunks, key=key, checkpoint_sha256=self.checkpoint_sha256, sample_rate=self.sample_rate)
        if len(data) > self.settings.max_entry_bytes:
            self.meter.write("too_large")
            return
        try:
            await self.store.put(key, data, self.settings.ttl_s)
        except CacheUnavailable as err:
            self.meter.write("error")
            self.log(f"cache write failed: {err}")
            return
        self.meter.write("stored")
        self.meter.bytes("written", len(data))

    async def drain(self) -> None:
        """Wait for the writes in flight on the running loop (for an orderly shutdown and for tests)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
