"""A Redis utterance cache shared by every server of a deployment (see :mod:`tts_triton.cache.utterance`).

Triton-free: the BLS wires :class:`UtteranceCache` around :meth:`~tts_triton.serving.service.TTSService.stream`
and counts through a :class:`~tts_triton.cache.utterance.CacheMeter`.
"""

from tts_triton.cache.key import FORMAT_VERSION, canonical, digest
from tts_triton.cache.settings import BYTE_DIRECTIONS, LOOKUP_OUTCOMES, WRITE_OUTCOMES, CacheSettings
from tts_triton.cache.store import CacheUnavailable, RedisStore
from tts_triton.cache.utterance import CacheMeter, UtteranceCache
from tts_triton.core.contract import CACHE_BYTES_METRIC as BYTES_METRIC
from tts_triton.core.contract import CACHE_LOOKUPS_METRIC as LOOKUPS_METRIC
from tts_triton.core.contract import CACHE_PARAMETER as OPT_OUT_PARAMETER
from tts_triton.core.contract import CACHE_WRITES_METRIC as WRITES_METRIC

__all__ = [
    "BYTES_METRIC", "BYTE_DIRECTIONS", "FORMAT_VERSION", "LOOKUPS_METRIC", "LOOKUP_OUTCOMES", "OPT_OUT_PARAMETER",
    "WRITES_METRIC", "WRITE_OUTCOMES", "CacheMeter", "CacheSettings", "CacheUnavailable", "RedisStore",
    "UtteranceCache", "canonical", "digest",
]
