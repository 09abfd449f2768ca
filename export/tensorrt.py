"""Build the TensorRT plans of the ``tensorrt`` repository target from the exported ONNX files.

Where TensorRT runs (the NGC image ``nvcr.io/nvidia/tritonserver:24.10-py3``: TensorRT 10.5), on the GPU
type that serves the plans::

    python -m tts_triton.export.tensorrt --onnx-dir ONNX --engines-dir ENGINES          # build what is stale
    python -m tts_triton.export.tensorrt --onnx-dir ONNX --engines-dir ENGINES --print-trtexec
    python -m tts_triton.export.tensorrt --onnx-dir ONNX --engines-dir ENGINES --check  # exit 1 if unusable here

Each network gets the optimization profiles of :func:`tts_triton.export.tensorrt_profiles.network_profiles`
for its ``max_batch_size`` in :class:`~tts_triton.export.repository.RepositorySettings` (the same spec that
writes the configs), its precision from :data:`DEFAULT_PRECISION`, and a timing cache shared by all builds
(``ENGINES/timing.cache``). Beside each ``<network>.plan`` a ``<network>.plan.json`` records the ONNX file's
sha256, the precision, the profiles, the TensorRT version and the GPU; a plan whose record does not match the
ONNX file, the spec or this host is rebuilt, and ``--check`` names what differs instead of letting Triton fail
to deserialize it. INT8 is not offered: its quality has not been measured on these networks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import DECODER, STYLE_ENCODER, TEXT_ENCODER, VOCODER, network_specs
from tts_triton.export.digest import file_sha256

from .repository import RepositorySettings
from .tensorrt_profiles import Profile, network_profiles

__all__ = [
    "DEFAULT_PRECISION",
    "EngineHost",
    "EngineJob",
    "PlanMismatchError",
    "build_engine",
    "check_plans",
    "detect_host",
    "engine_jobs",
    "main",
    "plan_problem",
    "trtexec_command",
]

PRECISIONS = ("fp32", "fp16")
#: fp16 wherever it holds; the vocoder stage stays fp32: its mel match is not fp16-safe
#: (:mod:`tts_triton.models.mel_match` says why).
DEFAULT_PRECISION = {TEXT_ENCODER: "fp16", STYLE_ENCODER: "fp16", DECODER: "fp16", VOCODER: "fp32"}
TIMING_CACHE = "timing.cache"
WORKSPACE_MIB = 4096


class PlanMismatchError(RuntimeError):
    """A plan is missing, stale, or was built with another TensorRT or GPU than this host's."""


@dataclass(frozen=True)
class EngineHost:
    """What a plan is tied to: the TensorRT version and the GPU (name and compute capability)."""

    tensorrt: str
    gpu: str
    compute_capability: str

    def describe(self) -> str:
        return f"TensorRT {self.tensorrt} on {self.gpu} (compute capability {self.compute_capability})"


@dataclass(frozen=True)
class EngineJob:
    """One plan to build: the network, its ONNX file, the plan path, its profiles and precision."""

    network: str
    onnx: Path
    plan: Path
    profiles: tuple[Profile, ...]
    precision: str

    @property
    def record(self) -> Path:
        """The JSON record beside the plan."""
        return self.plan.with_name(self.plan.name + ".json")

    def spec_fields(self) -> dict[str, Any]:
        """The record's fields that depend on the ONNX file and the spec (not on the host)."""
        profiles = [{name: [list(r.min), list(r.opt), list(r.max)] for name, r in p.shapes.items()}
                    for p in self.profiles]
        return {"network": self.network, "onnx_sha256": file_sha256(self.onnx), "precision": self.precision,
                "profiles": profiles}


def engine_jobs(onnx_dir: Path, engines_dir: Path, *, model_config: ModelConfig | None = None,
                settings: RepositorySettings | None = None, precision: str | None = None) -> list[EngineJob]:
    """The plans of every network: profiles from ``settings`` (max_batch_size), precision ``precision`` for
    all or :data:`DEFAULT_PRECISION` per network."""
    settings = settings or RepositorySettings()
    specs = network_specs(model_config or ModelConfig())
    return [EngineJob(name, Path(onnx_dir) / f"{name}.onnx", Path(engines_dir) / f"{name}.plan",
                      tuple(network_profiles(spec, settings.networks[name].max_batch_size)),
                      precision or DEFAULT_PRECISION[name]) for name, spec in specs.items()]


def _shape_arg(profile: Profile, k: int) -> str:
    return ",".join(f"{name}:{'x'.join(map(str, dataclasses.astuple(r)[k]))}" for name, r in profile.shapes.items())


def trtexec_command(job: EngineJob, timing_cache: Path, *, workspace_mib: int = WORKSPACE_MIB) -> list[str]:
    """The ``trtexec`` command that builds ``job``: one ``--minShapes/--optShapes/--maxShapes`` triple per
    profile, in profile order (trtexec makes each repeated triple a further profile)."""
    command = ["trtexec", f"--onnx={job.onnx}", f"--saveEngine={job.plan}", f"--timingCacheFile={timing_cache}",
               f"--memPoolSize=workspace:{workspace_mib}"]
    if job.precision == "fp16":
        command.append("--fp16")
    for profile in job.profiles:
        command += [f"--minShapes={_shape_arg(profile, 0)}", f"--optShapes={_shape_arg(profile, 1)}",
                    f"--maxShapes={_shape_arg(profile, 2)}"]
    return command


def plan_problem(job: EngineJob, host: EngineHost) -> str | None:
    """Why ``job``'s plan cannot be served on ``host`` as it is (``None`` when it can)."""
    if not job.plan.is_file():
        return f"{job.plan} does not exist"
    if not job.record.is_file():
        return f"{job.plan} has no record {job.record.name}: its TensorRT version and GPU are unknown"
    record = json.loads(job.record.read_text())
    built = EngineHost(**record["host"])
    if built != host:
        return f"{job.plan} was built with {built.describe()}; this host has {host.describe()}"
    expected = job.spec_fields()
    for key, what in (("onnx_sha256", "another ONNX file"), ("precision", "another precision"),
                      ("profiles", "other optimization profiles")):
        if record.get(key) != expected[key]:
            return f"{job.plan} was built from {what} than {job.onnx} and the repository spec now give"
    return None


def check_plans(jobs: Sequence[EngineJob], host: EngineHost) -> None:
    """Raise ``PlanMismatchError`` naming every plan that cannot be served on ``host`` and what to run."""
    problems = [problem for job in jobs if (problem := plan_problem(job, host))]
    if problems:
        raise PlanMismatchError("; ".join(problems) + ". Rebuild them here: python -m tts_triton.export.tensorrt "
                                "--onnx-dir ONNX --engines-dir ENGINES")


def detect_host() -> EngineHost:
    """This host's TensorRT version and first GPU; ``RuntimeError`` when either is missing."""
    try:
        import tensorrt as trt  # optional heavy dependency: only present where plans are built
    except ImportError as exc:
        raise RuntimeError("TensorRT is not installed here: build plans in nvcr.io/nvidia/tritonserver:24.10-py3 "
                           "(TensorRT 10.5), or print the trtexec commands with --print-trtexec") from exc
    if shutil.which("nvidia-smi") is None:
        raise RuntimeError("nvidia-smi not found: plans are built on the GPU type that serves them")
    query = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"], check=True,
                           capture_output=True, text=True).stdout.splitlines()[0]
    gpu, capability = (field.strip() for field in query.rsplit(",", 1))
    return EngineHost(trt.__version__, gpu, capability)


def build_engine(job: EngineJob, timing_cache: Path, host: EngineHost, *, workspace_mib: int = WORKSPACE_MIB) -> None:
    """Build ``job``'s plan with the TensorRT Python API, update the timing cache, write the record."""
    import tensorrt as trt  # optional heavy dependency: only present where plans are built

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch: the only mode of TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(job.onnx)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {job.onnx}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mib << 20)
    if job.precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    cache = config.create_timing_cache(timing_cache.read_bytes() if timing_cache.is_file() else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    for profile in job.profiles:
        optimization = builder.create_optimization_profile()
        for name, shapes in profile.shapes.items():
            optimization.set_shape(name, shapes.min, shapes.opt, shapes.max)
        config.add_optimization_profile(optimization)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT failed to build {job.plan} (see the log above)")
    job.plan.write_bytes(bytes(serialized))
    timing_cache.write_bytes(bytes(config.get_timing_cache().serialize()))
    record = {**job.spec_fields(), "host": dataclasses.asdict(host),
              "built_at": datetime.now(UTC).isoformat(timespec="seconds")}
    job.record.write_text(json.dumps(record, indent=2) + "\n")



def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tts_triton.export.tensorrt", description=__doc__.split("\n")[0])
    p.add_argument("--onnx-dir", type=Path, required=True, help="folder of <network>.onnx from the ONNX export")
    p.add_argument("--engines-dir", type=Path, required=True, help="folder for <network>.plan, records, timing cache")
    p.add_argument("--model-config", type=Path, help="JSON of ModelConfig.to_dict() (default: ModelConfig())")
    p.add_argument("--precision", choices=PRECISIONS, help="one precision for every network (default: per network)")
    p.add_argument("--workspace-mib", type=int, default=WORKSPACE_MIB, help="builder workspace (default %(default)s)")
    p.add_argument("--print-trtexec", action="store_true", help="print the trtexec commands instead of building")
    p.add_argument("--check", action="store_true", help="only check that every plan can be served on this host")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: build stale plans, print trtexec commands, or check plans; 0 on success, 1 with a message."""
    args = _parser().parse_args(argv)
    config = ModelConfig.from_dict(json.loads(args.model_config.read_text())) if args.model_config else None
    jobs = engine_jobs(args.onnx_dir, args.engines_dir, model_config=config, precision=args.precision)
    timing_cache = args.engines_dir / TIMING_CACHE
    if args.print_trtexec:
        print(f"mkdir -p {shlex.quote(str(args.engines_dir))}")
        for job in jobs:
            print(shlex.join(trtexec_command(job, timing_cache, workspace_mib=args.workspace_mib)))
        return 0
    try:
        host = detect_host()
        if args.check:
            check_plans(jobs, host)
            print(f"{len(jobs)} plans in {args.engines_dir} match {host.describe()}")
            return 0
        args.engines_dir.mkdir(parents=True, exist_ok=True)
        for job in jobs:
            if (problem := plan_problem(job, host)) is None:
                print(f"{job.plan} is current")
                continue
            print(f"building {job.plan}: {problem} ({len(job.profiles)} profiles, {job.precision})", flush=True)
            build_engine(job, timing_cache, host, workspace_mib=args.workspace_mib)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
