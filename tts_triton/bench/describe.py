"""What the report says about the setup: the host, the server under test and the sentence set."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tts_triton.bench.stats import LevelResult, percentile
from tts_triton.bench.workload import SENTENCES
from tts_triton.core import audio
from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import TTS
from tts_triton.core.layout import MANIFEST_FILE
from tts_triton.processes.memory import allocator_of

__all__ = ["ServerInfo", "describe_gpus", "describe_machine", "describe_server", "sentence_rows"]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def describe_gpus() -> str:
    """The GPUs ``nvidia-smi`` lists (name, memory, driver), or '' where there is none."""
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                                 "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    return f"{len(lines)}: " + "; ".join(lines) if lines else ""


def describe_machine() -> list[tuple[str, str]]:
    """CPU model, cores, virtualisation, GPUs, memory, OS and the client-side package versions."""
    cpuinfo = _read("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    kind = "virtual machine (hypervisor flag set in /proc/cpuinfo)" if " hypervisor" in flags else "no hypervisor flag"
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                   if line.startswith("MemTotal:")), 0)
    os_name = next((line.split("=", 1)[1].strip().strip('"') for line in _read("/etc/os-release").splitlines()
                    if line.startswith("PRETTY_NAME=")), platform.system())
    return [
        ("CPU", f"{model}; {os.cpu_count()} logical CPUs ({usable} usable by this process); {kind}"),
        *([("GPU", gpus)] if (gpus := describe_gpus()) else []),
        ("Memory", f"{mem_kb / 2**20:.1f} GiB" if mem_kb else "unknown"),
        ("OS", f"{os_name}, kernel {platform.release()}"),
        ("Python", platform.python_version()),
        ("Packages", ", ".join(f"{p} {_version(p)}" for p in ("onnxruntime", "tritonclient", "nvidia-pytriton",
                                                                "numpy", "torch"))),
    ]


@dataclass(frozen=True)
class ServerInfo:
    """What the report says about the server: (label, value) facts, whether the weights are trained (None:
    unknown), the network settings from ``repository.json`` (embedded server only) and the ``tts`` parameters."""

    facts: list[tuple[str, str]]
    trained: bool | None
    settings: dict[str, Any]
    parameters: dict[str, str]


async def describe_server(server: Any, url: str, repository: Path | None, pid: int | None = None) -> ServerInfo:
    """Ask the server (metadata, ``tts`` config), read the repository's manifest when there is one and, given the
    server's process ``pid``, the allocator it runs with (from its memory map)."""
    meta = await server.get_server_metadata(as_json=True)
    config = (await server.get_model_config(TTS, as_json=True)).get("config", {})
    params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
    info = json.loads(params.get("voice_bank", "{}")).get("info", {})
    trained = info.get("trained")
    facts = [
        ("Triton", f"{meta.get('name', 'triton')} {meta.get('version', '?')} at {url}"
                   + (" (embedded server started by the bench)" if repository else "")),
        ("Checkpoint", f"`{params.get('checkpoint_name') or info.get('checkpoint', '?')}`, trained: "
                       + {True: "yes", False: "**no**"}.get(trained, "unknown")),
    ]
    settings: dict[str, Any] = {}
    manifest_path = repository / MANIFEST_FILE if repository else None
    if manifest_path and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        facts.append(("Repository", f"`{repository}`, target `{manifest.get('target')}`, built "
                                    f"{manifest.get('built_at', '?')}, checkpoint sha256 "
                                    f"{manifest.get('checkpoint_sha256', '?')[:12]}"))
        served = manifest.get("settings", {})
        settings = served.get("networks", {})
        steps = served.get("steps_per_call") or "the checkpoint's"
        facts.append(("BLS", f"{served.get('bls_instances', '?')} instance(s) of `tts`; decoder steps per call: "
                             f"{steps}"))
    if pid is not None and (allocator := allocator_of(pid)):
        facts.append(("Allocator", f"{allocator} (tritonserver's memory map)"))
    return ServerInfo(facts, trained, settings, params)


def _num(value: float, digits: int) -> str:
    return "–" if math.isnan(value) else f"{value:,.{digits}f}"


def sentence_rows(levels: Sequence[LevelResult], model_config: str) -> list[tuple[str, str, str, str, str]]:
    """The sentence table: kind, text, phoneme ids, audio seconds at the max-steps guard, median measured audio
    (of the measured requests whose text starts with the sentence: with a repeat ratio, its coded variants)."""
    from tts_triton.text.frontend import text_to_sequences

    decoder = ModelConfig.from_dict(json.loads(model_config)).decoder if model_config else None
    rows = []
    for kind, text in SENTENCES:
        ids = [len(seq) for seq in text_to_sequences(text)]
        guard = (sum(decoder.max_steps(n) for n in ids) * decoder.frames_per_step * audio.HOP_LENGTH
                 / audio.SAMPLE_RATE) if decoder else math.nan
        heard = [r.audio_seconds for level in levels for r in level.records
                 if r.measured and r.ok and r.text.startswith(text)]
        rows.append((kind, text, "+".join(map(str, ids)), _num(guard, 2), _num(percentile(heard, 50), 2)))
    return rows
