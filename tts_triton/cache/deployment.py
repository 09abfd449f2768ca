"""What a serving model puts into every cache key besides the request, and how it opens its cache.

The deployment part of a key comes from the repository's manifest (``repository.json``, written by the
repository builder): checkpoint and voice-bank digests, runtime target, package version and the build
settings that can change audio; plus the served model config and streaming settings. Two servers
of one build share entries; a different checkpoint, target or setting never reads them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tts_triton.cache.metrics import CounterMeter
from tts_triton.cache.settings import CacheSettings
from tts_triton.cache.utterance import UtteranceCache
from tts_triton.core.contract import CACHE_PARAMETER, CACHE_SCOPE_PARAMETER
from tts_triton.errors import InvalidInput

#: Build settings that change only speed, never the audio: left out so that differently tuned servers share.
THROUGHPUT_SETTINGS = ("networks", "bls_instances", "bls_call_threads")
#: Manifest entries that determine audio.
MANIFEST_KEYS = ("checkpoint_sha256", "voice_bank_sha256", "target", "tts_triton_version")


def deployment_fingerprint(repository: Path, model_config: Mapping[str, Any], streaming: Any) -> dict[str, Any] | None:
    """The deployment part of every key, or None when ``repository`` has no manifest (then there is no
    checkpoint digest to key on, and no cache)."""
    from tts_triton.export.repository import read_manifest

    manifest = read_manifest(repository)
    if manifest is None or not all(k in manifest for k in MANIFEST_KEYS):
        return None
    settings = {k: v for k, v in manifest.get("settings", {}).items() if k not in THROUGHPUT_SETTINGS}
    return {**{k: manifest[k] for k in MANIFEST_KEYS}, "settings": settings, "model_config": dict(model_config),
            "streaming": dataclasses.asdict(streaming)}


def open_cache(environ: Mapping[str, str], model_dir: str | None, model: str, model_config: Mapping[str, Any],
               streaming: Any, *, sample_rate: int, family: Callable[[str, str], Any],
               log: Callable[[str], None], add: Callable[[Any, float], None] | None = None,
               ) -> tuple[UtteranceCache, CounterMeter] | None:
    """The model's cache and its counters when ``environ`` configures one (``TTS_CACHE_REDIS_URL``), else
    None. ``model_dir`` is the model's folder in the repository (Triton's ``args["model_repository"]``); a
    repository without a manifest gets no cache (logged); ``add`` is the counters' (:class:`CounterMeter`). No Redis
    connection is made here."""
    settings = CacheSettings.from_env(environ)
    if settings is None:
        return None
    repository = Path(model_dir).parent if model_dir else None
    deployment = None if repository is None else deployment_fingerprint(repository, model_config, streaming)
    if deployment is None:
        log(f"{model}: utterance cache off: no repository.json beside {model_dir} to key the cache on")
        return None
    meter = CounterMeter(family, model, add)
    return UtteranceCache(settings, deployment, sample_rate=sample_rate, meter=meter, log=log), meter


def cache_wanted(parameters: str | Mapping[str, Any] | None) -> bool:
    """Whether a request's Triton parameters (JSON text or a dict) leave the cache on: the
    :data:`~tts_triton.core.contract.CACHE_PARAMETER` parameter ``false`` (bool, or the string
    ``"false"``) opts out; raises InvalidInput for any other value than true/false."""
    values = json.loads(parameters or "{}") if isinstance(parameters, str | None) else parameters
    value = values.get(CACHE_PARAMETER, True)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise InvalidInput(CACHE_PARAMETER, f"request parameter must be true or false, got {value!r}")
    return value


#: Characters of a cache scope at most (the gateway's are 32).
MAX_SCOPE_CHARS = 128


def cache_scope(parameters: str | Mapping[str, Any] | None) -> str:
    """The :data:`~tts_triton.core.contract.CACHE_SCOPE_PARAMETER` of a request's Triton parameters (JSON text or a
    dict): whose entries it may read and write; "" when absent (the shared scope). Raises InvalidInput for a value
    that is not a string of at most :data:`MAX_SCOPE_CHARS` characters."""
    values = json.loads(parameters or "{}") if isinstance(parameters, str | None) else parameters
    value = values.get(CACHE_SCOPE_PARAMETER, "")
    if not isinstance(value, str) or len(value) > MAX_SCOPE_CHARS:
        raise InvalidInput(CACHE_SCOPE_PARAMETER, f"request parameter must be a string of at most {MAX_SCOPE_CHARS} "
                                                  f"characters, got {value!r:.40}")
    return value
