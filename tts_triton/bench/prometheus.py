"""Triton's Prometheus metrics page, as the bench reads it: GPU memory and the utterance cache's lookups."""

from __future__ import annotations

import urllib.error
import urllib.request

from tts_triton.core.contract import CACHE_LOOKUPS_METRIC

__all__ = [
    "CACHE_LOOKUPS_METRIC",
    "GPU_MEMORY_METRIC",
    "cache_lookups",
    "fetch_metrics",
    "gpu_memory_bytes",
    "samples",
]

#: Triton's per-GPU memory gauge (``gpu_uuid`` label), in bytes.
GPU_MEMORY_METRIC = "nv_gpu_memory_used_bytes"


def _labels(text: str) -> dict[str, str]:
    """``a="x",b="y"`` -> ``{"a": "x", "b": "y"}`` (values as written, escapes kept)."""
    labels: dict[str, str] = {}
    rest = text.strip()
    while rest:
        name, _, rest = rest.partition("=")
        value, i = "", 1
        while i < len(rest) and rest[i] != '"':
            value += rest[i : i + 2] if rest[i] == "\\" else rest[i]
            i += 2 if rest[i] == "\\" else 1
        labels[name.strip()] = value
        rest = rest[i + 1 :].lstrip(", ")
    return labels


def samples(page: str, metric: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of ``metric`` on a Prometheus text page: (labels, value), in page order."""
    out = []
    for line in page.splitlines():
        if not line.startswith(metric):
            continue
        rest = line[len(metric):]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            close = rest.rindex("}")
            labels, rest = _labels(rest[1:close]), rest[close + 1:]
        elif not rest.startswith(" "):
            continue  # another metric whose name merely starts alike
        out.append((labels, float(rest.split()[0])))
    return out


def gpu_memory_bytes(page: str) -> float | None:
    """The sum of :data:`GPU_MEMORY_METRIC` over every GPU of a metrics page; None when the page has no such
    sample (a server without GPU metrics)."""
    values = [value for _, value in samples(page, GPU_MEMORY_METRIC)]
    return sum(values) if values else None


def cache_lookups(page: str) -> dict[str, float]:
    """:data:`CACHE_LOOKUPS_METRIC` summed over models, by outcome; ``{}`` when the page has none (no cache)."""
    out: dict[str, float] = {}
    for labels, value in samples(page, CACHE_LOOKUPS_METRIC):
        outcome = labels.get("outcome", "")
        out[outcome] = out.get(outcome, 0.0) + value
    return out


def fetch_metrics(metrics_url: str | None, timeout: float = 5.0) -> str | None:
    """The metrics page at ``metrics_url``; None without a URL or an answer."""
    if metrics_url is None:
        return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
    try:
        with opener.open(metrics_url, timeout=timeout) as response:
            return response.read().decode()
    except (urllib.error.URLError, OSError):
        return None
