"""A Redis utterance cache shared by every server of a deployment (see :mod:`tts_triton.cache.utterance`).

Triton-free: the BLS wires :class:`UtteranceCache` around :meth:`~tts_triton.serving.service.TTSService.stream`
and counts through a :class:`~tts_triton.cache.utterance.CacheMeter`.
"""

from tts_triton.cache.key import FORMAT_VERSION, canonical, digest
from tts_triton.cache.settings import (
    BYTE_DIRECTIONS,
    BYTES_METRIC,
    LOOKUP_OUTCOMES,
    LOOKUPS_METRIC,
    OPT_OUT_PARAMETER,
    WRITE_OUTCOMES,
    WRITES_METRIC,
    CacheSettings,
)
from tts_triton.cache.store import CacheUnavailable, RedisStore
from tts_triton.cache.utterance import CacheMeter, UtteranceCache

__all__ = [
    "BYTES_METRIC", "BYTE_DIRECTIONS", "FORMAT_VERSION", "LOOKUPS_METRIC", "LOOKUP_OUTCOMES", "OPT_OUT_PARAMETER",
    "WRITES_METRIC", "WRITE_OUTCOMES", "CacheMeter", "CacheSettings", "CacheUnavailable", "RedisStore",
    "UtteranceCache", "canonical", "digest",
]
