"""The TensorRT engine builder's spec, without TensorRT (it cannot be installed here).

What runs here: the optimization profiles cover every shape the decode loop sends and nothing else, the
``trtexec`` commands carry exactly those profiles, the repository's instance groups list them, the plan
records catch plans built elsewhere, and the CLI without TensorRT says where to build. What does not: the
engine build itself (``build_engine``) and ``detect_host``, which need TensorRT and a GPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import VOCODER, ModelSpec, network_specs
from tts_triton.core.shapes import axis_values, batch_buckets
from tts_triton.export.build import ensure_repository
from tts_triton.export.pbtxt import parse, render
from tts_triton.export.repository import RUNTIME_TARGETS, EnginesMissingError, RepositorySettings, _network_config
from tts_triton.export.tensorrt import (
    DEFAULT_PRECISION,
    EngineHost,
    EngineJob,
    PlanMismatchError,
    check_plans,
    engine_jobs,
    main,
    plan_problem,
    trtexec_command,
)
from tts_triton.export.tensorrt_profiles import network_profiles

SETTINGS = RepositorySettings()
SPECS = network_specs(ModelConfig())
AXES = axis_values()
H200 = EngineHost("10.5.0", "NVIDIA H200", "9.0")


def sent_values(axis: str) -> list[int]:
    """Values of a dynamic axis the decode loop sends: every bucket, or a range's ends and inside."""
    values = AXES[axis]
    return list(values.buckets) or sorted({values.low, values.low + 1, (values.low + values.high) // 2, values.high})


def shapes_for(spec: ModelSpec, batch: int, chosen: dict[str, int]) -> dict[str, tuple[int, ...]]:
    return {t.name: (batch, *(chosen[d] if isinstance(d, str) else d for d in t.dims)) for t in spec.inputs}


def dynamic_axes(spec: ModelSpec) -> list[str]:
    return sorted({d for t in spec.inputs for d in t.dims if isinstance(d, str)})


@pytest.mark.parametrize("name", sorted(SPECS))
def test_profiles_cover_every_shape_the_decode_loop_sends(name: str) -> None:
    spec, max_batch = SPECS[name], SETTINGS.networks[name].max_batch_size
    profiles = network_profiles(spec, max_batch)
    axes = dynamic_axes(spec)
    for batch in range(1, max_batch + 1):  # every batch the dynamic batcher may form, buckets included
        for combination in itertools.product(*(sent_values(a) for a in axes)):
            shapes = shapes_for(spec, batch, dict(zip(axes, combination, strict=True)))
            assert any(p.admits(shapes) for p in profiles), f"{name}: no profile for {shapes}"
    assert set(batch_buckets(max_batch)) <= set(range(1, max_batch + 1))
    expected = 1
    for axis in axes:
        expected *= len(AXES[axis].buckets) or 1
    assert len(profiles) == expected  # one per bucket: Triton picks the profile by shape


@pytest.mark.parametrize("name", sorted(SPECS))
def test_profiles_admit_nothing_the_decode_loop_does_not_send(name: str) -> None:
    spec, max_batch = SPECS[name], SETTINGS.networks[name].max_batch_size
    profiles = network_profiles(spec, max_batch)
    axes = dynamic_axes(spec)
    typical = {a: sent_values(a)[0] for a in axes}
    assert not any(p.admits(shapes_for(spec, max_batch + 1, typical)) for p in profiles)
    for axis in axes:
        values = AXES[axis]
        unsent = [v for v in range(1, values.high + 2) if not values.allows(v)]
        for value in unsent:
            shapes = shapes_for(spec, 1, {**typical, axis: value})
            assert not any(p.admits(shapes) for p in profiles), f"{name}: {axis}={value} admitted"


def parse_trtexec_profiles(command: list[str]) -> list[dict[str, list[tuple[int, ...]]]]:
    """The profiles a trtexec command line defines: each min/opt/max triple in order."""
    triples = [arg for arg in command if re.match(r"--(min|opt|max)Shapes=", arg)]
    assert len(triples) % 3 == 0
    profiles = []
    for i in range(0, len(triples), 3):
        kinds = [arg.split("=", 1)[0] for arg in triples[i:i + 3]]
        assert kinds == ["--minShapes", "--optShapes", "--maxShapes"]
        entry: dict[str, list[tuple[int, ...]]] = {}
        for arg in triples[i:i + 3]:
            for item in arg.split("=", 1)[1].split(","):
                tensor, dims = item.split(":")
                entry.setdefault(tensor, []).append(tuple(int(d) for d in dims.split("x")))
        profiles.append(entry)
    return profiles


def test_trtexec_commands_carry_exactly_the_profiles(tmp_path: Path) -> None:
    jobs = engine_jobs(tmp_path / "onnx", tmp_path / "engines")
    assert [job.network for job in jobs] == list(SPECS)
    for job in jobs:
        command = trtexec_command(job, tmp_path / "engines" / "timing.cache")
        assert command[0] == "trtexec"
        assert f"--onnx={tmp_path / 'onnx' / job.network}.onnx" in command
        assert f"--saveEngine={job.plan}" in command
        assert f"--timingCacheFile={tmp_path / 'engines' / 'timing.cache'}" in command
        assert ("--fp16" in command) == (DEFAULT_PRECISION[job.network] == "fp16")
        expected = network_profiles(SPECS[job.network], SETTINGS.networks[job.network].max_batch_size)
        assert parse_trtexec_profiles(command) == [
            {name: [r.min, r.opt, r.max] for name, r in p.shapes.items()} for p in expected]
    assert DEFAULT_PRECISION[VOCODER] == "fp32"  # the mel match is not fp16-safe
    forced = engine_jobs(tmp_path / "onnx", tmp_path / "engines", precision="fp32")
    assert not any("--fp16" in trtexec_command(job, tmp_path / "t") for job in forced)


def test_repository_instance_groups_list_every_profile() -> None:
    for name, spec in SPECS.items():
        config = parse(render(_network_config(spec, RUNTIME_TARGETS["tensorrt"], SETTINGS, ModelConfig())))
        [group] = config.instance_group
        profiles = network_profiles(spec, SETTINGS.networks[name].max_batch_size)
        assert list(group.profile) == [str(i) for i in range(len(profiles))]


def fake_plan(job: EngineJob, host: EngineHost) -> None:
    """A plan file with the record build_engine writes (the plan bytes are not read by the checks)."""
    job.plan.parent.mkdir(parents=True, exist_ok=True)
    job.plan.write_bytes(b"plan")
    job.record.write_text(json.dumps({**job.spec_fields(), "host": dataclasses.asdict(host)}))


def test_plan_records_catch_plans_built_elsewhere_or_stale(tmp_path: Path) -> None:
    (tmp_path / "onnx").mkdir()
    jobs = engine_jobs(tmp_path / "onnx", tmp_path / "engines")
    for job in jobs:
        job.onnx.write_bytes(job.network.encode())
    decoder = next(job for job in jobs if job.network == "decoder")
    assert plan_problem(decoder, H200) == f"{decoder.plan} does not exist"
    for job in jobs:
        fake_plan(job, H200)
    check_plans(jobs, H200)  # all current
    a10 = EngineHost("10.3.0", "NVIDIA A10", "8.6")
    with pytest.raises(PlanMismatchError) as mismatch:
        check_plans(jobs, a10)
    message = str(mismatch.value)
    assert "built with TensorRT 10.5.0 on NVIDIA H200 (compute capability 9.0); this host has TensorRT 10.3.0 on " \
           "NVIDIA A10 (compute capability 8.6)" in message and "python -m tts_triton.export.tensorrt" in message
    assert "another precision" in plan_problem(dataclasses.replace(decoder, precision="fp32"), H200)
    assert "other optimization profiles" in plan_problem(dataclasses.replace(decoder, profiles=decoder.profiles[:1]),
                                                         H200)
    decoder.onnx.write_bytes(b"re-exported")
    assert "another ONNX file" in plan_problem(decoder, H200)
    decoder.record.unlink()
    assert "has no record" in plan_problem(decoder, H200)


def test_cli_prints_trtexec_and_says_where_to_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--onnx-dir", str(tmp_path / "onnx"), "--engines-dir", str(tmp_path / "engines")]
    assert main([*args, "--print-trtexec"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("mkdir -p ") and len(lines) == 1 + len(SPECS)
    assert all(line.startswith("trtexec --onnx=") for line in lines[1:])
    assert main(args) == 1  # TensorRT cannot be installed on this machine
    assert "TensorRT is not installed here" in capsys.readouterr().err


START = Path(__file__).resolve().parents[2] / "deploy" / "docker" / "start.sh"


def test_docker_start_script_prepares_the_build_and_stops_where_tensorrt_is_missing(
    model_repository: Path, tmp_path: Path
) -> None:
    """start.sh on this host (no TensorRT, no tritonserver on PATH): it derives the build inputs from the ONNX
    repository, then the builder refuses with the reason; tritonserver is never reached."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "MODEL_SOURCE": str(model_repository),
           "TTS_STATE": str(tmp_path / "state"), "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(START)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "error: TensorRT is not installed here" in run.stderr
    state = tmp_path / "state"
    for name in SPECS:
        assert (state / "onnx" / f"{name}.onnx").resolve() == model_repository / name / "1" / "model.onnx"
    manifest = json.loads((model_repository / "repository.json").read_text())
    assert json.loads((state / "model_config.json").read_text()) == manifest["model_config"]
    assert not (state / "model_repository").exists()


def test_build_repo_tensorrt_without_plans_writes_nothing_and_says_what_to_run(
    model_repository: Path, checkpoint_file: Path, tmp_path: Path
) -> None:
    cache = model_repository.parent / "cache"  # the test repository's export cache: the ONNX files exist
    out = tmp_path / "repo"
    with pytest.raises(EnginesMissingError) as missing:
        ensure_repository(out, checkpoint=checkpoint_file, cache=cache, target="tensorrt", progress=False)
    onnx_dir = next(cache.glob("*/onnx"))
    message = str(missing.value)
    assert f"python -m tts_triton.export.tensorrt --onnx-dir {onnx_dir} --engines-dir ENGINES" in message
    assert f"--engines-dir ENGINES --out {out}" in message and "deploy/docker/start.sh" in message
    assert not out.exists()
