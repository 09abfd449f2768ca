"""Build the Triton model repository for one runtime target from the tensor contract.

Layout of ``<out>/``::

    repository.json                      manifest: target, checkpoint sha256, model config, settings, build time
    text_encoder/ style_encoder/ decoder/ vocoder/
        config.pbtxt                     contract.network_specs + RepositorySettings + the target
        1/model.onnx [+ model.py]        or 1/model.plan (tensorrt: built by tts_triton.export.tensorrt)
    encode/config.pbtxt, 1/              ensemble: text_encoder and style_encoder side by side
    tts/ tts_offline/                    Python BLS (decoupled / one response): config.pbtxt, voice_bank.json,
                                         1/model.py

Every ``config.pbtxt`` comes from one generator (:mod:`tts_triton.export.pbtxt`); the targets differ
only in the fields a :class:`RuntimeTarget` names. ONNX files are checked against the contract when
they are copied in. The repository is built in a sibling temporary directory and then swapped in.

CLI::

    python -m tts_triton.export.repository --onnx-dir build/onnx --checkpoint ckpt.pt \\
        --voice-bank voices.json --target onnxruntime-python --out model_repository
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tts_triton import __version__
from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import (
    ENSEMBLES,
    TTS,
    TTS_OFFLINE,
    ModelSpec,
    ensemble_spec,
    network_specs,
    tts_spec,
)
from tts_triton.core.layout import (
    BATCH_BUDGET,
    BLS_CALL_THREADS,
    CHECKPOINT_NAME,
    CUDA_GRAPHS,
    FIRST_CHUNK_FIRST,
    FP16,
    INPUT_AXES,
    INTER_OP_THREADS,
    INTRA_OP_THREADS,
    MANIFEST_FILE,
    MAX_STREAMS,
    MODEL_CONFIG,
    MODEL_PY,
    NETWORK_MAX_BATCH,
    VERSION_DIR,
    VOICE_BANK,
    VOICE_BANK_FILE,
)
from tts_triton.core.onnx_io import io_mismatches
from tts_triton.core.voices import VoiceBank
from tts_triton.export.digest import file_sha256
from tts_triton.model_instance.params import input_axes_parameter

from .pbtxt import EnumValue, render, string_parameters, tensor
from .settings import NetworkSettings, RepositorySettings, tuned
from .targets import DEFAULT_TARGET, KIND_CPU, KIND_GPU, RUNTIME_TARGETS, RuntimeTarget
from .tensorrt_profiles import network_profiles

__all__ = [
    "EnginesMissingError",
    "RUNTIME_TARGETS",
    "NetworkSettings",
    "RepositorySettings",
    "RuntimeTarget",
    "build_repository",
    "main",
    "read_manifest",
    "repository_is_current",
]

#: Top-level files of an existing repository that a rebuild keeps (Triton ignores top-level files).
KEPT_FILES = ("README.md",)
BLS_MODULE = "tts_triton.triton.bls"
#: Python BLS models of the repository (``include_bls``): name -> decoupled (streams its responses).
BLS_MODELS = {TTS: True, TTS_OFFLINE: False}


class EnginesMissingError(FileNotFoundError):
    """The ``tensorrt`` target was asked for without its TensorRT plans; the message says what to run."""


def _engines_missing(engines_dir: Path | None, names: Sequence[str], onnx_dir: Path, out_dir: Path) -> str:
    """Why plans are missing and the commands that build them, in one paragraph."""
    where = "no --engines-dir given" if engines_dir is None else (
        "missing in " + str(engines_dir) + ": " + ", ".join(f"{name}.plan" for name in names))
    return (f"the tensorrt target needs one TensorRT plan per network ({where}); nothing was written. Plans are "
            "built where TensorRT runs (TensorRT 10.5 in nvcr.io/nvidia/tritonserver:24.10-py3), on the GPU type "
            f"that serves them. There, run `python -m tts_triton.export.tensorrt --onnx-dir {onnx_dir} "
            f"--engines-dir ENGINES` (add --print-trtexec for the equivalent trtexec commands), then build the "
            f"repository with `--engines-dir ENGINES --out {out_dir}`; or let the Docker image do both on its "
            "first start (deploy/docker/start.sh)")


def build_repository(
    out_dir: Path,
    *,
    onnx_dir: Path | None = None,
    model_config: ModelConfig,
    checkpoint: Path,
    voice_bank: Path,
    target: str = DEFAULT_TARGET,
    settings: RepositorySettings | None = None,
    engines_dir: Path | None = None,
    include_bls: bool = True,
    checkpoint_name: str | None = None,
) -> Path:
    """Write the model repository for ``target`` to ``out_dir`` and return ``out_dir``.

    ``out_dir`` must be absent, empty, or a repository built by this function (it has a
    ``repository.json``): anything else raises ``FileExistsError`` and is left alone. The new tree is
    built beside it and swapped in at the end, so a failed build leaves the old repository intact.
    ``engines_dir`` supplies the ``<network>.plan`` files the ``tensorrt`` target requires: without all of
    them ``EnginesMissingError`` says how to build them, and nothing is written.
    ``include_bls=False`` leaves out ``tts`` and ``tts_offline`` (networks and ensembles only).
    ``checkpoint_name`` (default: the checkpoint's file name) is what the BLS models report.
    """
    if target not in RUNTIME_TARGETS:
        raise ValueError(f"unknown runtime target {target!r}; choose from {sorted(RUNTIME_TARGETS)}")
    runtime = RUNTIME_TARGETS[target]
    settings = settings or RepositorySettings.for_target(target)
    out_dir, checkpoint, voice_bank = map(Path, (out_dir, checkpoint, voice_bank))
    if runtime.source == "onnx" and onnx_dir is None:
        raise ValueError(f"target {target!r} needs onnx_dir (the exported <network>.onnx files)")
    fingerprint = _fingerprint(runtime.name, checkpoint, voice_bank, model_config, settings)
    if settings.steps_per_call is not None and runtime.source != "checkpoint":
        raise ValueError(f"steps_per_call applies to targets that run the checkpoint, not {target!r} (the "
                         "exported graphs fix the checkpoint's steps per call)")
    model_config = settings.serving_config(model_config)
    specs = network_specs(model_config)
    settings.validate(list(specs))
    bank = VoiceBank.load(voice_bank)
    _check_replaceable(out_dir)
    if runtime.source == "plan":
        missing = [n for n in specs if engines_dir is None or not (Path(engines_dir) / f"{n}.plan").is_file()]
        if missing:
            raise EnginesMissingError(_engines_missing(engines_dir, missing, onnx_dir, out_dir))

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        staging.chmod(0o755)
        artifacts: dict[str, str] = {}
        for name, spec in specs.items():
            version_dir = _model_dir(staging, name, _network_config(spec, runtime, settings, model_config))
            artifacts[name] = _install_artifact(runtime, spec, version_dir, onnx_dir=onnx_dir, engines_dir=engines_dir,
                                                checkpoint=checkpoint)
        for name, members in ENSEMBLES.items():
            config = _ensemble_config(ensemble_spec(model_config, name), [specs[m] for m in members], settings)
            _model_dir(staging, name, config)
        if include_bls:
            _write_bls_models(staging, model_config, voice_bank, bank, settings, checkpoint_name or checkpoint.name)
        for kept in KEPT_FILES:
            if (out_dir / kept).is_file():
                shutil.copyfile(out_dir / kept, staging / kept)
        manifest = {
            **fingerprint,
            "checkpoint_name": checkpoint_name or checkpoint.name,
            "models": sorted(p.name for p in staging.iterdir() if p.is_dir()),
            "artifacts_sha256": artifacts,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        _swap_in(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def read_manifest(out_dir: Path) -> dict[str, Any] | None:
    """The ``repository.json`` of a built repository, or ``None`` when there is none."""
    path = Path(out_dir) / MANIFEST_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def repository_is_current(
    out_dir: Path,
    *,
    model_config: ModelConfig,
    checkpoint: Path,
    voice_bank: Path,
    target: str = DEFAULT_TARGET,
    settings: RepositorySettings | None = None,
    onnx_dir: Path | None = None,
) -> bool:
    """Whether ``out_dir`` was built from this checkpoint, voice bank, config, target and settings, holds every
    network and ensemble this code calls (one built before an ensemble was added does not), and, for an ONNX target
    given ``onnx_dir``, from these ONNX files (same content: a re-export changes them)."""
    manifest = read_manifest(out_dir)
    if manifest is None or not {*network_specs(model_config), *ENSEMBLES} <= set(manifest.get("models", ())):
        return False
    expected = json.loads(json.dumps(_fingerprint(target, Path(checkpoint), Path(voice_bank), model_config,
                                                  settings or RepositorySettings.for_target(target))))
    if not all(manifest.get(key) == value for key, value in expected.items()):
        return False
    if onnx_dir is None or RUNTIME_TARGETS[target].source != "onnx":
        return True
    artifacts = manifest.get("artifacts_sha256", {})
    files = {name: Path(onnx_dir) / f"{name}.onnx" for name in network_specs(model_config)}
    return all(path.is_file() and artifacts.get(name) == file_sha256(path) for name, path in files.items())


def _fingerprint(
    target: str, checkpoint: Path, voice_bank: Path, model_config: ModelConfig, settings: RepositorySettings
) -> dict[str, Any]:
    """The manifest entries that decide whether a repository must be rebuilt."""
    return {
        "target": target,
        "checkpoint_sha256": file_sha256(checkpoint),
        "voice_bank_sha256": file_sha256(voice_bank),
        "model_config": model_config.to_dict(),
        "settings": dataclasses.asdict(settings),
        "tts_triton_version": __version__,
    }


def _network_config(spec: ModelSpec, runtime: RuntimeTarget, settings: RepositorySettings,
                    model_config: ModelConfig) -> dict[str, Any]:
    net = settings.networks[spec.name]
    config: dict[str, Any] = {"name": spec.name}
    if runtime.python_model:
        config["backend"] = "python"
    else:
        config["platform"] = runtime.platform
    config["max_batch_size"] = net.max_batch_size
    config["input"] = [tensor(t) for t in spec.inputs]
    if runtime.python_model:  # the model groups its requests by shape itself, so the batcher need not
        for entry in config["input"]:
            if -1 in entry["dims"]:
                entry["allow_ragged_batch"] = True
    config["output"] = [tensor(t) for t in spec.outputs]
    config["dynamic_batching"] = {"max_queue_delay_microseconds": net.max_queue_delay_us}
    kind = settings.instance_kind or net.kind or runtime.instance_kind
    group: dict[str, Any] = {"kind": EnumValue(kind), "count": net.instances}
    if runtime.source == "plan":  # without the list, Triton runs only a plan's first optimization profile
        group["profile"] = [str(i) for i in range(len(network_profiles(spec, net.max_batch_size)))]
    config["instance_group"] = [group]
    params = {INPUT_AXES: input_axes_parameter(spec)}  # the model rejects shapes the BLS never sends
    if runtime.cpu_threads:
        params |= {INTRA_OP_THREADS: str(net.intra_op_threads), INTER_OP_THREADS: str(net.inter_op_threads)}
    if runtime.source == "checkpoint":
        params |= {
            MODEL_CONFIG: json.dumps(model_config.to_dict(), separators=(",", ":")),
            FP16: "true" if settings.fp16 else "false",
            CUDA_GRAPHS: "true" if settings.cuda_graphs else "false",
        }
        if net.batch_budget is not None:
            params[BATCH_BUDGET] = str(net.batch_budget)
    config["parameters"] = string_parameters(params)
    if net.response_cache:
        config["response_cache"] = {"enable": True}
    return config


def bls_parameters(model_config: ModelConfig, bank: VoiceBank, settings: RepositorySettings,
                   checkpoint_name: str) -> dict[str, str]:
    """The config parameters of ``tts`` and ``tts_offline`` (:mod:`tts_triton.triton.bls` reads them)."""
    return {
        MODEL_CONFIG: json.dumps(model_config.to_dict(), separators=(",", ":")),
        VOICE_BANK: json.dumps(bank.to_dict(), ensure_ascii=False, separators=(",", ":")),
        CHECKPOINT_NAME: checkpoint_name,
        FIRST_CHUNK_FIRST: "true" if settings.first_chunk_first else "false",
        MAX_STREAMS: str(settings.max_streams),
        BLS_CALL_THREADS: str(settings.bls_call_threads),
        NETWORK_MAX_BATCH: json.dumps(settings.max_batch_sizes(), separators=(",", ":")),
    }


def _write_bls_models(root: Path, model_config: ModelConfig, voice_bank: Path, bank: VoiceBank,
                      settings: RepositorySettings, checkpoint_name: str) -> None:
    """``tts`` and ``tts_offline``: config (with the model config and voice bank), adapter, voice bank file."""
    params = bls_parameters(model_config, bank, settings, checkpoint_name)
    for name, decoupled in BLS_MODELS.items():
        version_dir = _model_dir(root, name, _bls_config(tts_spec(model_config, name), decoupled, params, settings))
        _write_adapter(version_dir, name, BLS_MODULE)
        shutil.copyfile(voice_bank, version_dir.parent / VOICE_BANK_FILE)


def _ensemble_config(spec: ModelSpec, members: Sequence[ModelSpec], settings: RepositorySettings) -> dict[str, Any]:
    """An ensemble whose members run in order, each on the ensemble's inputs and the outputs of those before it
    (Triton runs members side by side where neither needs the other); every tensor keeps its name."""
    fed = {t.name for m in members for t in m.inputs}
    produced = {t.name for m in members for t in m.outputs}
    if fed - produced != set(spec.input_names) or produced != set(spec.output_names):
        raise ValueError(f"ensemble {spec.name!r}: members {[m.name for m in members]} do not cover its tensors")
    steps = [
        {
            "model_name": m.name,
            "model_version": -1,
            "input_map": [{"key": t.name, "value": t.name} for t in m.inputs],
            "output_map": [{"key": t.name, "value": t.name} for t in m.outputs],
        }
        for m in members
    ]
    return {
        "name": spec.name,
        "platform": "ensemble",
        "max_batch_size": settings.max_batch_sizes()[spec.name],
        "input": [tensor(t) for t in spec.inputs],
        "output": [tensor(t) for t in spec.outputs],
        "ensemble_scheduling": {"step": steps},
    }


def _bls_config(
    spec: ModelSpec, decoupled: bool, params: Mapping[str, str], settings: RepositorySettings
) -> dict[str, Any]:
    return {
        "name": spec.name,
        "backend": "python",
        "max_batch_size": 0,
        "input": [tensor(t) for t in spec.inputs],
        "output": [tensor(t) for t in spec.outputs],
        "model_transaction_policy": {"decoupled": decoupled},
        "instance_group": [{"kind": EnumValue(KIND_CPU), "count": settings.bls_instances}],
        "parameters": string_parameters(params),
    }


def _model_dir(root: Path, name: str, config: Mapping[str, Any]) -> Path:
    """Create ``<root>/<name>/`` with its ``config.pbtxt``; return the version directory."""
    version_dir = root / name / VERSION_DIR
    version_dir.mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(render(config))
    return version_dir


def _install_artifact(
    runtime: RuntimeTarget, spec: ModelSpec, version_dir: Path, *, onnx_dir: Path | None,
    engines_dir: Path | None, checkpoint: Path,
) -> str:
    """Put the network's artifact (and adapter) into ``version_dir``; return its sha256."""
    if runtime.python_model:
        _write_adapter(version_dir, spec.name, runtime.python_model)
    if runtime.source == "onnx":
        source = Path(onnx_dir) / f"{spec.name}.onnx"
        if not source.is_file():
            raise FileNotFoundError(f"{source} not found: export the ONNX networks first")
        _check_onnx(source, spec)
    elif runtime.source == "plan" and engines_dir is not None:  # build_repository checked that every plan exists
        source = Path(engines_dir) / f"{spec.name}.plan"
    elif runtime.source == "checkpoint":
        source = checkpoint
    else:
        raise ValueError(f"target {runtime.name!r}: unknown artifact source {runtime.source!r}")
    shutil.copyfile(source, version_dir / runtime.artifact)
    return file_sha256(source)


def _check_onnx(path: Path, spec: ModelSpec) -> None:
    import onnxruntime as ort  # optional heavy dependency: only the ONNX targets need it

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    if problems := io_mismatches(session, spec.inputs, spec.outputs, batched=spec.batched):
        raise ValueError(f"{path} does not match the contract of {spec.name!r}: " + "; ".join(problems))


def _write_adapter(version_dir: Path, model_name: str, module: str) -> None:
    (version_dir / MODEL_PY).write_text(
        f'"""Triton entry point of `{model_name}` (generated by tts_triton.export.repository)."""\n\n'
        f"from {module} import TritonPythonModel  # noqa: F401\n"
    )


def _check_replaceable(out_dir: Path) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    if (out_dir / MANIFEST_FILE).is_file() or {p.name for p in out_dir.iterdir()} <= set(KEPT_FILES):
        return
    raise FileExistsError(f"{out_dir} is not a model repository built by tts_triton (no {MANIFEST_FILE}); "
                          "refusing to replace it")


def _swap_in(staging: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    retired = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
    out_dir.rename(retired)
    staging.rename(out_dir)
    shutil.rmtree(retired)



def main(argv: list[str] | None = None) -> int:
    """CLI: build a model repository; exit status 0 on success, 1 with a message on stderr otherwise."""
    parser = argparse.ArgumentParser(prog="python -m tts_triton.export.repository", description=__doc__.split("\n")[0])
    parser.add_argument("--onnx-dir", type=Path, help="folder of <network>.onnx from the ONNX export (ONNX targets)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="the checkpoint the networks were exported from")
    parser.add_argument("--voice-bank", type=Path, required=True, help="voice bank JSON (voices, emotions, presets)")
    parser.add_argument("--target", choices=list(RUNTIME_TARGETS), default=DEFAULT_TARGET)
    parser.add_argument("--out", type=Path, default=Path("model_repository"), help="repository folder to (re)write")
    parser.add_argument("--engines-dir", type=Path, help="folder of <network>.plan (tensorrt target)")
    parser.add_argument("--model-config", type=Path,
                        help="JSON of ModelConfig.to_dict() (default: the config stored in the checkpoint)")
    parser.add_argument("--instance-kind", choices=(KIND_CPU, KIND_GPU), help="override the target's instance kind")
    parser.add_argument("--bls-instances", type=int, help="instances of tts and tts_offline (default: the target's)")
    parser.add_argument("--steps-per-call", type=int,
                        help="decoder steps per call (torch-cuda only; default 16)")
    parser.add_argument("--instances", action="append", default=[], metavar="NETWORK=N",
                        help="instances of one network model (per GPU for KIND_GPU); repeatable")
    parser.add_argument("--queue-delay-us", action="append", default=[], metavar="NETWORK=US",
                        help="dynamic batcher's max queue delay of one network model, microseconds; repeatable")
    parser.add_argument("--max-batch-size", action="append", default=[], metavar="NETWORK=N",
                        help="Triton's max_batch_size of one network model; repeatable")
    parser.add_argument("--batch-budget", action="append", default=[], metavar="NETWORK=N",
                        help="torch-cuda: most rows x tokens (or mel frames) of one device call; repeatable")
    parser.add_argument("--max-streams", type=int,
                        help="admission bound: most requests in flight in tts (and in tts_offline) over all their "
                             "instances, more are refused at once; 0 for none (default: 256 on a GPU, 32 on the CPU)")
    parser.add_argument("--first-chunk-first", action="store_true",
                        help="each stream keeps one vocoder call in flight and decodes on only once its first chunk "
                             "is out: lower first-chunk latency under load, for less throughput")
    args = parser.parse_args(argv)
    from tts_triton.models.checkpoint import read_config  # the model stack (torch): only when the CLI runs

    given = {"instance_kind": args.instance_kind, "steps_per_call": args.steps_per_call,
             "bls_instances": args.bls_instances, "first_chunk_first": args.first_chunk_first or None,
             "max_streams": args.max_streams}
    settings = RepositorySettings.for_target(args.target, **{k: v for k, v in given.items() if v is not None})
    try:
        settings = tuned(settings, {"instances": args.instances, "max_queue_delay_us": args.queue_delay_us,
                                     "batch_budget": args.batch_budget, "max_batch_size": args.max_batch_size})
        model_config = (ModelConfig.from_dict(json.loads(args.model_config.read_text())) if args.model_config
                        else read_config(args.checkpoint))
        out = build_repository(args.out, onnx_dir=args.onnx_dir, model_config=model_config, checkpoint=args.checkpoint,
                               voice_bank=args.voice_bank, target=args.target, settings=settings,
                               engines_dir=args.engines_dir)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    manifest = read_manifest(out) or {}
    print(f"wrote {args.target} repository {out}: {', '.join(manifest.get('models', []))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
