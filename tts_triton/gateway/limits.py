"""API keys, the per-gateway stream limit and the per-key quotas.

Keys: ``Authorization: Bearer <key>``, checked in constant time against keys read from a file (one per line,
``#`` comments) and/or an environment variable (comma-separated). With no keys, every request is served:
``tts-triton gateway`` allows that on a loopback address only, unless told otherwise (:func:`auth_problem`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from .errors import ApiError

__all__ = ["API_KEYS_ENV", "KeyQuotas", "StreamLimiter", "auth_problem", "cache_scope", "check_key", "key_allowed",
           "load_api_keys"]

#: Environment variable holding comma-separated API keys.
API_KEYS_ENV = "TTS_GATEWAY_API_KEYS"


def load_api_keys(path: Path | None = None, environ: dict[str, str] | None = None) -> frozenset[str]:
    """Keys from ``path`` (one per line; blank lines and ``#`` comments skipped) and ``$TTS_GATEWAY_API_KEYS``."""
    environ = os.environ if environ is None else environ
    keys = [k.strip() for k in environ.get(API_KEYS_ENV, "").split(",")]
    if path is not None:
        keys += [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return frozenset(k for k in keys if k)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_problem(host: str, keys: frozenset[str], *, allow_anonymous: bool) -> str | None:
    """Why the gateway must not start with these settings (no keys on a non-loopback address), or None."""
    if keys or allow_anonymous or is_loopback(host):
        return None
    return (f"--host {host} is not a loopback address and no API keys are set: give --api-keys-file FILE or "
            f"${API_KEYS_ENV}, or pass --allow-anonymous to serve without keys")


def check_key(keys: frozenset[str], authorization: str | None) -> str | None:
    """The key the ``Authorization`` header carries (None when ``keys`` is empty: none is asked for); a 401
    unless it is one of ``keys``."""
    if not keys:
        return None
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "missing API key: send `Authorization: Bearer <key>`", code="invalid_api_key")
    if not key_allowed(keys, token):
        raise ApiError(401, "incorrect API key", code="invalid_api_key")
    return token


def cache_scope(key: str | None, *, shared: bool) -> str | None:
    """The utterance-cache scope of a request made with ``key``: a digest of the key (Triton never sees the key), so
    that cached audio is shared only among one key's requests; None (the shared scope) without keys or when the
    operator shares the cache across keys (``shared``)."""
    if key is None or shared:
        return None
    return hashlib.sha256(b"tts-triton cache scope\0" + key.encode()).hexdigest()[:32]


def key_allowed(keys: frozenset[str], token: str) -> bool:
    """Whether ``token`` is one of ``keys`` (compared in constant time)."""
    return any(hmac.compare_digest(token.encode(), key.encode()) for key in keys)


class StreamLimiter:
    """At most ``limit`` streams at once in one event loop; over it, a 429 with ``Retry-After``."""

    def __init__(self, limit: int, retry_after_s: int = 1) -> None:
        if limit < 1:
            raise ValueError("the stream limit must be at least 1")
        self.limit = limit
        self.retry_after_s = retry_after_s
        self.active = 0

    def acquire(self) -> None:
        """Take a slot or raise the 429."""
        if self.active >= self.limit:
            raise ApiError(429, f"this gateway is at its limit of {self.limit} concurrent streams; retry shortly",
                           code="too_many_streams", headers={"Retry-After": str(self.retry_after_s)})
        self.active += 1

    def release(self) -> None:
        self.active -= 1


class KeyQuotas:
    """What one API key may take of a gateway: ``max_streams`` streams at once (each stream of a request, each
    session of the input-streaming sockets counts apart, :class:`~.sessions.SessionHub`) and ``per_minute``
    requests and sessions started per minute (a bucket of that many, refilled evenly; 0: no bound). Over either,
    a 429 with ``Retry-After``. One event loop; no locking."""

    def __init__(self, max_streams: int, per_minute: int, retry_after_s: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_streams < 1 or per_minute < 0:
            raise ValueError("the per-key stream limit must be at least 1 and the request rate not negative")
        self.max_streams, self.per_minute, self.retry_after_s = max_streams, per_minute, retry_after_s
        self.clock = clock
        self.streams: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when counted)

    def start(self, key: str) -> None:
        """Count one request or session of ``key`` against its rate, or raise the 429 saying when to retry."""
        if not self.per_minute:
            return
        now = self.clock()
        tokens, then = self._buckets.get(key, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - then) * self.per_minute / 60.0)
        if tokens < 1.0:
            wait = math.ceil((1.0 - tokens) * 60.0 / self.per_minute)
            raise ApiError(429, f"this API key is at its limit of {self.per_minute} requests per minute; retry in "
                                f"{wait} s", code="key_rate_limited", headers={"Retry-After": str(wait)})
        self._buckets[key] = (tokens - 1.0, now)
        if len(self._buckets) > _MAX_BUCKETS:  # keys are few; a bound all the same
            self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < 60.0}

    def acquire(self, key: str) -> Callable[[], None]:
        """Take one of ``key``'s streams (the release function) or raise the 429."""
        if self.streams.get(key, 0) >= self.max_streams:
            raise ApiError(429, f"this API key is at its limit of {self.max_streams} concurrent streams; retry "
                                "shortly", code="key_too_many_streams",
                           headers={"Retry-After": str(self.retry_after_s)})
        self.streams[key] = self.streams.get(key, 0) + 1

        def release() -> None:
            self.streams[key] -= 1
            if not self.streams[key]:
                del self.streams[key]

        return release


#: Keys whose request rate is remembered before the idle ones are forgotten.
_MAX_BUCKETS = 10_000
