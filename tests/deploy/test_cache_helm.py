"""The chart's utterance cache (values ``cache:``): the Triton container's ``TTS_CACHE_*`` environment, the
bundled Redis (LRU, no persistence, password from a Secret, a NetworkPolicy admitting only the Triton pods)."""

from __future__ import annotations

import subprocess

from test_helm import CHART, HELM, _one, _render, needs_helm

from tts_triton.cache import CacheSettings


def _triton_env(docs: list[dict]) -> dict[str, dict]:
    deploy = _one(docs, "Deployment", "tts-tts-triton")
    container = next(c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "tritonserver")
    return {e["name"]: e for e in container["env"]}


@needs_helm
def test_cache_off_by_default() -> None:
    docs = _render()
    assert not any(name.startswith("TTS_CACHE_") for name in _triton_env(docs))
    assert not any("redis" in d["metadata"]["name"] for d in docs)


@needs_helm
def test_bundled_redis() -> None:
    docs = _render("cache.enabled=true", "cache.bundled.enabled=true")
    env = _triton_env(docs)
    values = {name: e["value"] for name, e in env.items() if "value" in e and name.startswith("TTS_CACHE_")}
    settings = CacheSettings.from_env(values)  # what the BLS reads back
    assert settings is not None and settings.redis_url == "redis://tts-tts-triton-redis:6379/0"
    assert settings.namespace == "tts-tts-triton" and settings.timeout_s == 0.1
    secret_ref = env["TTS_CACHE_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert secret_ref == {"name": "tts-tts-triton-redis-password", "key": "redis-password"}
    assert _one(docs, "Secret", "tts-tts-triton-redis-password")["data"]["redis-password"]

    redis = _one(docs, "Deployment", "tts-tts-triton-redis")
    pod = redis["spec"]["template"]
    command = " ".join(pod["spec"]["containers"][0]["args"])
    assert "--maxmemory 2gb --maxmemory-policy allkeys-lru" in command
    assert '--save "" --appendonly no' in command and '--requirepass "$REDIS_PASSWORD"' in command
    triton_selector = _one(docs, "Deployment", "tts-tts-triton")["spec"]["selector"]["matchLabels"]
    assert not triton_selector.items() <= pod["metadata"]["labels"].items()  # not one of Triton's pods

    policy = _one(docs, "NetworkPolicy", "tts-tts-triton-redis")
    assert policy["spec"]["podSelector"]["matchLabels"] == redis["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["ingress"][0]["from"] == [{"podSelector": {"matchLabels": triton_selector}}]
    service = _one(docs, "Service", "tts-tts-triton-redis")
    assert service["spec"]["selector"] == redis["spec"]["selector"]["matchLabels"]


@needs_helm
def test_existing_redis() -> None:
    docs = _render("cache.enabled=true", "cache.redis.url=rediss://cache.internal:6380/2",
                   "cache.redis.passwordSecret=cache-auth", "cache.namespace=eu")
    env = _triton_env(docs)
    assert env["TTS_CACHE_REDIS_URL"]["value"] == "rediss://cache.internal:6380/2"
    assert env["TTS_CACHE_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "cache-auth"
    assert env["TTS_CACHE_NAMESPACE"]["value"] == "eu"
    assert not any("redis" in d["metadata"]["name"] for d in docs)


@needs_helm
def test_cache_without_a_redis_is_refused() -> None:
    cmd = [HELM, "template", "tts", str(CHART), "--set", "cache.enabled=true"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode != 0
    assert "cache.enabled needs cache.redis.url" in result.stderr


