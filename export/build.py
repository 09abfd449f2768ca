"""From a checkpoint to a served model repository, rebuilding only what changed.

:func:`ensure_repository` exports the ONNX files and the voice bank into a cache folder keyed by
the checkpoint's content and the exporting code, then (re)writes the repository when its manifest says
it is stale (another checkpoint, voice bank, config, target, settings or ONNX content).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from tts_triton.core import contract
from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.core.paths import cache_dir, default_model_repository
from tts_triton.export.digest import file_sha256
from tts_triton.export.targets import DEFAULT_TARGET, RUNTIME_TARGETS
from tts_triton.models.checkpoint import (
    DEFAULT_CHECKPOINT,
    DEFAULT_VOICE_BANK,
    UNTRAINED_LABEL,
    Checkpoint,
    init_checkpoint,
    load_checkpoint,
)

if TYPE_CHECKING:
    from tts_triton.export.repository import RepositorySettings


def exporter_fingerprint() -> str:
    """sha256 of the sources that shape the exported graphs (the networks, the audio constants, the
    configs, the contract, the exporter): part of the ONNX cache's key, so new code exports anew."""
    modules = [importlib.util.find_spec(f"tts_triton.{name}") for name in
               ("models", "core.audio", "core.config", "core.contract", "export.onnx_export")]
    assert all(spec is not None and spec.origin is not None for spec in modules)
    networks, *files = (Path(spec.origin) for spec in modules)  # type: ignore[union-attr,arg-type]
    sources = [*sorted(networks.parent.glob("*.py")), *files]
    h = hashlib.sha256()
    for path in sources:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def materialize_checkpoint(checkpoint: Path | None, cache: Path) -> tuple[Path, Checkpoint]:
    """The checkpoint file to build from: ``checkpoint``, the shipped default, or a written-out seeded init."""
    if checkpoint is None and DEFAULT_CHECKPOINT.exists():
        checkpoint = DEFAULT_CHECKPOINT
    if checkpoint is not None:
        return checkpoint, load_checkpoint(checkpoint)
    ckpt = init_checkpoint()
    path = cache / f"{ckpt.name}.pt"
    if not path.exists():
        ckpt.save(path)
    return path, load_checkpoint(path)


def refresh_shipped_bank(ckpt_path: Path, bank: Path) -> bool:
    """For the shipped checkpoint, make ``bank`` (its build cache's copy) the shipped voice bank, copying it again
    whenever the shipped file changed (a new bank ships for the same weights); False for any other checkpoint."""
    if ckpt_path != DEFAULT_CHECKPOINT or not DEFAULT_VOICE_BANK.exists():
        return False
    shipped = DEFAULT_VOICE_BANK.read_bytes()
    if not bank.exists() or bank.read_bytes() != shipped:
        bank.parent.mkdir(parents=True, exist_ok=True)
        bank.write_bytes(shipped)
    return True


def ensure_repository(out: Path | None = None, *, checkpoint: Path | None = None, target: str = DEFAULT_TARGET,
                      cache: Path | None = None, force: bool = False, progress: bool = True,
                      engines_dir: Path | None = None,
                      settings: RepositorySettings | None = None) -> Path:
    """Build ``out`` for ``target`` (with ``settings``, default the target's) unless it is already current;
    returns ``out``.

    ``out`` defaults to :func:`~tts_triton.core.paths.default_model_repository`, ``cache`` (exported ONNX files and
    voice banks) to :func:`~tts_triton.core.paths.cache_dir`, both read at the call (so ``$XDG_CACHE_HOME`` counts).

    ``engines_dir`` holds the TensorRT plans the ``tensorrt`` target needs (``EnginesMissingError``
    without them); given, the repository is always rewritten, since plans are not part of its fingerprint.
    """
    from tts_triton.export.onnx_export import export_checkpoint
    from tts_triton.export.repository import build_repository, repository_is_current
    from tts_triton.export.voice_bank import build_voice_bank, teacher_references

    def say(message: str) -> None:
        if progress:
            print(message, flush=True)

    if target not in RUNTIME_TARGETS:
        raise ValueError(f"unknown runtime target {target!r}; choose from {list(RUNTIME_TARGETS)}")
    out = default_model_repository() if out is None else out
    cache = cache_dir() if cache is None else cache
    cache.mkdir(parents=True, exist_ok=True)
    ckpt_path, ckpt = materialize_checkpoint(checkpoint, cache)
    if not ckpt.trained:
        say(f"warning: {UNTRAINED_LABEL}")
    work = cache / f"{file_sha256(ckpt_path)[:16]}-{exporter_fingerprint()[:8]}"
    bank = work / VOICE_BANK_FILE
    if not refresh_shipped_bank(ckpt_path, bank) and not bank.exists():
        say("building the voice bank from the teachers' reference clips ...")
        work.mkdir(parents=True, exist_ok=True)
        build_voice_bank(ckpt, teacher_references(voices=ckpt.voices)).save(bank)
    onnx_dir = work / "onnx"
    current = engines_dir is None and repository_is_current(
        out, model_config=ckpt.config, checkpoint=ckpt_path, voice_bank=bank, target=target, onnx_dir=onnx_dir,
        settings=settings)
    if current and not force:
        say(f"{out} is up to date ({target}, {ckpt.name})")
        return out
    needs_onnx = RUNTIME_TARGETS[target].source == "onnx"
    if needs_onnx and not all((onnx_dir / f"{name}.onnx").exists() for name in contract.network_specs(ckpt.config)):
        say(f"exporting ONNX to {onnx_dir} ...")
        export_checkpoint(ckpt, onnx_dir, progress=progress)
    build_repository(out, onnx_dir=onnx_dir, model_config=ckpt.config, checkpoint=ckpt_path, voice_bank=bank,
                     target=target, checkpoint_name=ckpt.name, engines_dir=engines_dir, settings=settings)
    say(f"wrote {target} repository {out}")
    return out
