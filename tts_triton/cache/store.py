"""Redis access for the cache, fail-open: every failure is a :class:`CacheUnavailable` the caller counts
and synthesizes past; nothing here may fail or hold back a request for longer than its timeout.

The ``redis.asyncio`` client (a blocking pool of ``max_connections``) belongs to the event loop that
first used it; a call from another loop (the ``tts`` stub's async-execute loop and ``tts_offline``'s own
loop are different loops, in different processes) gets a client of its own. Each call is bounded by
``asyncio.wait_for`` (connect, pool wait and command together). After a connection failure or timeout
Redis is left alone for an exponential backoff, so a dead or stalled Redis costs one timeout per backoff
period, not one per request; redis-py reconnects on the next call after it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tts_triton.cache.settings import CacheSettings

T = TypeVar("T")


class CacheUnavailable(Exception):
    """Redis did not answer in time, refused the command, or is backed off after failing."""


class RedisStore:
    """``get`` / ``put`` of entry bytes, bounded in time, with backoff after connection failures."""

    def __init__(self, settings: CacheSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.failures = 0
        self.retry_at = 0.0
        self._clients: dict[asyncio.AbstractEventLoop, Any] = {}

    def _client(self) -> Any:
        import redis.asyncio as aioredis  # only serving processes with a cache import redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            s = self.settings
            pool = aioredis.BlockingConnectionPool.from_url(
                s.redis_url, max_connections=s.max_connections, timeout=s.timeout_s, socket_timeout=s.write_timeout_s,
                socket_connect_timeout=s.timeout_s, retry=Retry(NoBackoff(), 0), **_password(s))
            client = self._clients[loop] = aioredis.Redis(connection_pool=pool)
        return client

    async def get(self, key: str) -> bytes | None:
        """The value at ``key``, or None; raises :class:`CacheUnavailable`."""
        return await self._call(lambda r: r.get(key), self.settings.timeout_s)

    async def put(self, key: str, value: bytes, ttl_s: int) -> None:
        """Set ``key`` to ``value`` expiring in ``ttl_s``; raises :class:`CacheUnavailable`."""
        await self._call(lambda r: r.set(key, value, ex=ttl_s), self.settings.write_timeout_s)

    async def _call(self, op: Callable[[Any], Awaitable[T]], timeout: float) -> T:
        import redis.exceptions as rx

        now = self.clock()
        if now < self.retry_at:
            raise CacheUnavailable(f"Redis backed off for {self.retry_at - now:.2f} s after {self.failures} failure(s)")
        try:
            result = await asyncio.wait_for(op(self._client()), timeout)
        except (TimeoutError, rx.ConnectionError, rx.TimeoutError, OSError) as err:
            self.failures += 1
            backoff = min(self.settings.max_backoff_s, self.settings.backoff_s * 2 ** (self.failures - 1))
            self.retry_at = self.clock() + backoff
            raise CacheUnavailable(f"Redis unreachable ({type(err).__name__}: {err or 'timed out'}); "
                                   f"retrying in {backoff:.2f} s") from None
        except rx.RedisError as err:  # answered, but refused (out of memory, wrong password, ...)
            raise CacheUnavailable(f"Redis refused: {type(err).__name__}: {err}") from None
        self.failures = 0
        return result

    async def aclose(self) -> None:
        """Close the client of the running loop."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
            await client.connection_pool.disconnect()


def _password(settings: CacheSettings) -> dict[str, str]:
    """The password keyword for the pool when the URL carries none."""
    from urllib.parse import urlsplit

    password = None if urlsplit(settings.redis_url).password else settings.password()
    return {"password": password} if password else {}
