"""Configuration and metric names of the utterance cache (one definition, read by the BLS, the CLI and the bench).

The serving processes read :class:`CacheSettings` from the environment (``TTS_CACHE_*``): that is how
``tts-triton serve --redis-url ...`` and the Helm chart reach the BLS, and it keeps the Redis password out
of ``config.pbtxt`` (which Triton serves to anyone who asks for the model config). No URL, no cache.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: ``hit``: answered from Redis; ``miss``: synthesized (and stored when it completes); ``error``: Redis
#: failed, timed out or is backed off, so synthesized; ``skipped``: not looked up (opt-out, text over
#: the bound).
LOOKUP_OUTCOMES = ("hit", "miss", "error", "skipped")
BYTE_DIRECTIONS = ("read", "written")
#: ``stored``; ``too_large``: over ``max_entry_bytes``, not stored; ``error``: Redis refused or failed.
WRITE_OUTCOMES = ("stored", "too_large", "error")
#: Environment variables are ``ENV_PREFIX`` + the field name in capitals, e.g. ``TTS_CACHE_REDIS_URL``.
ENV_PREFIX = "TTS_CACHE_"
URL_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True)
class CacheSettings:
    """Where the cache is and its bounds. ``redis_url``: ``redis://[:PASSWORD@]HOST:PORT/DB``, ``rediss://``
    for TLS or ``unix://PATH``; a password not in the URL comes from ``redis_password`` or the file
    ``redis_password_file``. ``namespace`` separates deployments sharing one Redis."""

    redis_url: str
    redis_password: str | None = field(default=None, repr=False)
    redis_password_file: str | None = None
    namespace: str = "default"
    #: Seconds an entry lives (Redis expires it).
    ttl_s: int = 7 * 24 * 3600
    #: Longer texts (characters of the parsed TEXT) are synthesized without a lookup.
    max_text_chars: int = 1000
    #: Entries over this size are not stored: 4 MiB holds ~95 s of 22.05 kHz 16-bit audio.
    max_entry_bytes: int = 4 << 20
    #: The most a lookup may add to a stream (connect, pool wait and GET together); a hit takes a small part of it.
    timeout_s: float = 0.1
    #: The most a background write may take.
    write_timeout_s: float = 2.0
    #: After a connection failure or timeout Redis is not asked for ``backoff_s``, doubling per failure
    #: in a row up to ``max_backoff_s``; the first success resets it.
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    max_connections: int = 64

    def __post_init__(self) -> None:
        scheme = urlsplit(self.redis_url).scheme
        if scheme not in URL_SCHEMES:
            raise ValueError(f"redis URL {self.redis_url!r}: scheme must be one of {', '.join(URL_SCHEMES)}")
        if self.timeout_s <= 0 or self.write_timeout_s <= 0 or self.ttl_s < 1 or self.max_entry_bytes < 1:
            raise ValueError(f"cache timeouts, TTL and entry bound must be positive: {self}")

    def password(self) -> str | None:
        """The password to send when the URL has none: ``redis_password``, else the file's first line."""
        if self.redis_password:
            return self.redis_password
        if self.redis_password_file:
            return Path(self.redis_password_file).read_text().strip() or None
        return None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> CacheSettings | None:
        """The settings in ``environ``; None when ``TTS_CACHE_REDIS_URL`` is unset or empty."""
        if not environ.get(ENV_PREFIX + "REDIS_URL"):
            return None
        values: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw:
                kind = type(getattr(_DEFAULTS, f.name)) if f.name != "redis_url" else str
                values[f.name] = raw if kind in (str, type(None)) else kind(raw)
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The environment variables that :meth:`from_env` reads back (fields left at their defaults are omitted)."""
        return {ENV_PREFIX + f.name.upper(): str(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name == "redis_url" or getattr(self, f.name) != f.default}


_DEFAULTS = CacheSettings("redis://")


def add_arguments(parser: Any) -> None:
    """``serve``'s cache options (an ``argparse`` parser)."""
    g = parser.add_argument_group("utterance cache (Redis; off unless --redis-url or TTS_CACHE_REDIS_URL is set)")
    g.add_argument("--redis-url", help="redis://[:PASSWORD@]HOST:PORT/DB, rediss:// for TLS, or unix://PATH; "
                                       "whoever can write to this Redis can make the service say anything")
    g.add_argument("--redis-password-file", help="file holding the Redis password (instead of one in the URL; "
                                                 "or set TTS_CACHE_REDIS_PASSWORD)")
    g.add_argument("--cache-namespace", help=f"key prefix separating deployments that share a Redis "
                                             f"(default {_DEFAULTS.namespace!r})")
    g.add_argument("--cache-ttl", type=int, help=f"seconds an entry lives (default {_DEFAULTS.ttl_s})")
    g.add_argument("--cache-timeout", type=float,
                   help=f"seconds a lookup may add to a stream at most (default {_DEFAULTS.timeout_s})")


def env_from_arguments(args: Any, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The ``TTS_CACHE_*`` variables for the server from ``serve``'s options over ``environ``'s;
    raises ``ValueError`` for a bad URL or bound."""
    options = {"redis_url": args.redis_url, "redis_password_file": args.redis_password_file,
               "namespace": args.cache_namespace, "ttl_s": args.cache_ttl, "timeout_s": args.cache_timeout}
    given = {ENV_PREFIX + name.upper(): str(value) for name, value in options.items() if value is not None}
    merged = {**{k: v for k, v in environ.items() if k.startswith(ENV_PREFIX)}, **given}
    if not merged.get(ENV_PREFIX + "REDIS_URL"):
        return {}
    settings = CacheSettings.from_env(merged)  # validates
    if settings is not None and settings.redis_password_file and not Path(settings.redis_password_file).is_file():
        raise ValueError(f"--redis-password-file {settings.redis_password_file}: no such file")
    return given
