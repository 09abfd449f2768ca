"""The cache key: a digest of everything that determines an utterance's audio.

:func:`canonical` turns a parsed request into JSON-able data generically: every field of a dataclass
(by name), arrays by dtype, shape and SHA-256 of their bytes. A field added to the request type is thus
in the key without editing this module; a value of a type it cannot encode raises ``TypeError``
rather than being left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

#: Bumped whenever the entry layout or the key derivation changes: old entries then simply miss (2: the lexicon's
#: digest and the request's scope joined the key).
FORMAT_VERSION = 2


def canonical(value: Any) -> Any:
    """``value`` as JSON-able data that differs whenever ``value`` does (dataclass field names included)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"@": type(value).__name__, **{f.name: canonical(getattr(value, f.name))
                                              for f in dataclasses.fields(value)}}
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):  # NaN and infinities are not JSON: keep them distinct as strings
        return value if math.isfinite(value) else repr(value)
    if hasattr(value, "dtype") and hasattr(value, "tobytes"):  # numpy arrays and scalars
        contiguous = value.copy(order="C")
        return {"dtype": str(value.dtype), "shape": list(getattr(value, "shape", ())),
                "sha256": hashlib.sha256(contiguous.tobytes()).hexdigest()}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    raise TypeError(f"cannot put a {type(value).__name__} into a cache key")


def digest(*parts: Any) -> str:
    """Hex SHA-256 of the canonical JSON of ``parts``."""
    text = json.dumps([canonical(p) for p in parts], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def redis_key(namespace: str, checkpoint_sha256: str, request_digest: str) -> str:
    """``<namespace>:tts:v<FORMAT_VERSION>:<checkpoint digest, 16 hex>:<request digest>``: the key names the
    format version and the checkpoint, so a new model or layout never reads an old entry."""
    return f"{namespace}:tts:v{FORMAT_VERSION}:{checkpoint_sha256[:16]}:{request_digest}"
