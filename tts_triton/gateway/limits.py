"""API keys and the per-gateway stream limit.

Keys: ``Authorization: Bearer <key>``, checked in constant time against keys read from a file (one per line,
``#`` comments) and/or an environment variable (comma-separated). With no keys, every request is served:
``tts-triton gateway`` allows that on a loopback address only, unless told otherwise (:func:`auth_problem`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path

from .errors import ApiError

__all__ = ["API_KEYS_ENV", "StreamLimiter", "auth_problem", "check_key", "key_allowed", "load_api_keys"]

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


def check_key(keys: frozenset[str], authorization: str | None) -> None:
    """Raise a 401 unless ``keys`` is empty or the ``Authorization`` header carries one of them."""
    if not keys:
        return
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "missing API key: send `Authorization: Bearer <key>`", code="invalid_api_key")
    if not key_allowed(keys, token):
        raise ApiError(401, "incorrect API key", code="invalid_api_key")


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
