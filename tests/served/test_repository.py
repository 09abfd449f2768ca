"""The model repository builder, its config.pbtxt files, the ONNX Runtime Python model, and a real Triton serving them.

The networks are stand-ins exported with torch.onnx: every output has its contract shape and holds,
per batch row, the sum of the means of that row's inputs, so a mis-split batch shows.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fake_pb_utils
import numpy as np
import onnxruntime as ort
import pytest
import torch
import tritonclient.http as httpclient
from tritonclient.grpc import model_config_pb2 as mc

from tts_triton.core.config import ModelConfig
from tts_triton.core.contract import (
    DECODER,
    ENCODE,
    ENSEMBLES,
    FIRST_DECODE,
    STYLE_ENCODER,
    TEXT_ENCODER,
    TTS,
    VOCODER,
    ModelSpec,
    ensemble_spec,
    ensemble_specs,
    network_specs,
    tts_spec,
)
from tts_triton.core.layout import BATCH_BUDGET, FIRST_CHUNK_FIRST, MANIFEST_FILE, NETWORK_MAX_BATCH, VOICE_BANK_FILE
from tts_triton.core.onnx_io import io_mismatches
from tts_triton.export import settings as settings_mod
from tts_triton.export.pbtxt import parse
from tts_triton.export.repository import (
    BLS_MODELS,
    RUNTIME_TARGETS,
    EnginesMissingError,
    RepositorySettings,
    build_repository,
    main,
    read_manifest,
    repository_is_current,
)
from tts_triton.models.checkpoint import FORMAT
from tts_triton.processes.triton_server import TritonServer
from tts_triton.triton import onnx_model
from tts_triton.triton.onnx_model import batch_groups, run_batch

CFG = ModelConfig()
SPECS = network_specs(CFG)
ALL_MODELS = [*SPECS, *ENSEMBLES, *BLS_MODELS]
VOICE_BANK = {
    "voices": ["晓晓", 'say "hi"\\'], "emotions": ["neutral", "happy"],
    "default_voice": "晓晓", "default_emotion": "neutral",
    "presets": {v: {"neutral": [0.5, -0.25], "happy": [0.25, 0.5]} for v in ("晓晓", 'say "hi"\\')},
    "info": {},
}


class StandIn(torch.nn.Module):
    """Outputs of ``spec``'s shapes; row ``b`` of every output is the sum over inputs of their row-``b`` mean."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.spec = spec

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        batch = inputs[0].shape[0]
        score = sum(x.float().reshape(batch, -1).mean(1) for x in inputs)
        axes = {axis: x.shape[i + 1] for t, x in zip(self.spec.inputs, inputs, strict=True)
                for i, axis in enumerate(t.dims) if isinstance(axis, str)}
        outputs = []
        for t in self.spec.outputs:
            shape = [d if isinstance(d, int) else axes.get(d, inputs[0].shape[1]) for d in t.dims]
            outputs.append(score.reshape(batch, *[1] * len(shape)).expand(batch, *shape))
        return tuple(outputs)


def example(spec: ModelSpec, batch: int, rng: np.random.Generator, axis_size: int = 5) -> dict[str, np.ndarray]:
    """Random inputs for ``spec`` with every dynamic axis of size ``axis_size``."""
    feed = {}
    for t in spec.inputs:
        shape = (batch, *[d if isinstance(d, int) else axis_size for d in t.dims])
        feed[t.name] = (rng.integers(0, 40, shape) if t.dtype.startswith("int") else rng.standard_normal(shape)).astype(
            t.dtype
        )
    return feed


def export_stand_in(spec: ModelSpec, path: Path) -> None:
    feed = example(spec, 2, np.random.default_rng(0))
    dynamic = {t.name: {0: "batch", **{i + 1: d for i, d in enumerate(t.dims) if isinstance(d, str)}}
               for t in (*spec.inputs, *spec.outputs)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated; it needs no onnxscript
        torch.onnx.export(StandIn(spec), tuple(torch.from_numpy(a) for a in feed.values()), str(path), dynamo=False,
                          input_names=spec.input_names, output_names=spec.output_names, dynamic_axes=dynamic)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """Stand-in ONNX networks, a checkpoint file and a voice bank."""
    root = tmp_path_factory.mktemp("sources")
    onnx_dir = root / "onnx"
    onnx_dir.mkdir()
    for spec in SPECS.values():
        export_stand_in(spec, onnx_dir / f"{spec.name}.onnx")
    checkpoint = root / "voice.pt"
    checkpoint.write_bytes(b"checkpoint bytes")
    voice_bank = root / "voices.json"
    voice_bank.write_text(json.dumps(VOICE_BANK, ensure_ascii=False), encoding="utf-8")
    return SimpleNamespace(onnx_dir=onnx_dir, checkpoint=checkpoint, voice_bank=voice_bank)


def build(sources: SimpleNamespace, out: Path, **kwargs: Any) -> Path:
    return build_repository(out, onnx_dir=sources.onnx_dir, model_config=CFG, checkpoint=sources.checkpoint,
                            voice_bank=sources.voice_bank, **kwargs)


@pytest.fixture(scope="module", params=sorted(RUNTIME_TARGETS))
def built(request: pytest.FixtureRequest, sources: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory):
    """(target, repository, parsed configs by model name) for every runtime target."""
    root = tmp_path_factory.mktemp(request.param)
    engines = None
    if RUNTIME_TARGETS[request.param].source == "plan":  # stand-in plans: only their copying is checked here
        engines = root / "engines"
        engines.mkdir()
        for name in SPECS:
            (engines / f"{name}.plan").write_bytes(name.encode())
    out = build(sources, root / "repo", target=request.param, engines_dir=engines)
    configs = {name: parse((out / name / "config.pbtxt").read_text()) for name in ALL_MODELS}
    return request.param, out, configs


def contract_specs(target: str = "onnxruntime-python") -> dict[str, ModelSpec]:
    """The contract as ``target`` serves it (torch-cuda: the decoder with its serving K)."""
    cfg = RepositorySettings.for_target(target).serving_config(CFG)
    return {**network_specs(cfg), **ensemble_specs(cfg), **{name: tts_spec(cfg, name) for name in BLS_MODELS}}


def test_every_config_matches_the_contract(built) -> None:
    target, out, configs = built
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(ALL_MODELS)
    for name, spec in contract_specs(target).items():
        config = configs[name]
        assert config.name == name
        for declared, tensors in ((config.input, spec.inputs), (config.output, spec.outputs)):
            assert [t.name for t in declared] == [t.name for t in tensors]
            for got, want in zip(declared, tensors, strict=True):
                assert mc.DataType.Name(got.data_type) == {"float32": "TYPE_FP32", "int32": "TYPE_INT32",
                                                          "bytes": "TYPE_STRING"}[want.dtype]
                assert list(got.dims) == want.triton_dims
        assert [t.optional for t in config.input] == [t.optional for t in spec.inputs]
        assert (config.max_batch_size > 0) == spec.batched


def test_networks_batch_dynamically_with_explicit_delay(built) -> None:
    target, out, configs = built
    runtime, settings = RUNTIME_TARGETS[target], RepositorySettings.for_target(target)
    for name in SPECS:
        config, net = configs[name], settings.networks[name]
        assert config.HasField("dynamic_batching")
        assert config.dynamic_batching.max_queue_delay_microseconds == net.max_queue_delay_us
        assert f"max_queue_delay_microseconds: {net.max_queue_delay_us}\n" in (out / name / "config.pbtxt").read_text()
        assert config.max_batch_size == net.max_batch_size
        assert [(mc.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in config.instance_group] == [
            (net.kind or runtime.instance_kind, net.instances)
        ]
        assert (config.backend, config.platform) == (("python", "") if runtime.python_model else ("", runtime.platform))
        assert config.response_cache.enable == net.response_cache
        if runtime.cpu_threads:
            assert config.parameters[onnx_model.INTRA_OP_THREADS].string_value == str(net.intra_op_threads)
        budget = config.parameters[BATCH_BUDGET].string_value if BATCH_BUDGET in config.parameters else None
        assert budget == (None if net.batch_budget is None else str(net.batch_budget))
    assert configs[STYLE_ENCODER].response_cache.enable


def test_only_tts_is_decoupled(built) -> None:
    _, _, configs = built
    assert [n for n, c in configs.items() if c.model_transaction_policy.decoupled] == [TTS]


@pytest.mark.parametrize(("name", "members"), [(ENCODE, [TEXT_ENCODER, STYLE_ENCODER]),
                                               (FIRST_DECODE, [TEXT_ENCODER, DECODER])])
def test_ensembles_wire_existing_tensors(built, name: str, members: list[str]) -> None:
    """Each step takes the ensemble's inputs or an earlier step's outputs; every input is used, every output made."""
    _, _, configs = built
    ensemble = configs[name]
    assert ensemble.platform == "ensemble"
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == members == list(ENSEMBLES[name])
    inputs, outputs = {t.name for t in ensemble.input}, {t.name for t in ensemble.output}
    consumed, produced = set(), []
    for step in ensemble.ensemble_scheduling.step:
        child = configs[step.model_name]
        assert ensemble.max_batch_size <= child.max_batch_size
        assert set(step.input_map) == {t.name for t in child.input}
        assert set(step.output_map) == {t.name for t in child.output}
        assert set(step.input_map.values()) <= inputs | set(produced)
        consumed |= set(step.input_map.values())
        produced += step.output_map.values()
    assert consumed - set(produced) == inputs and sorted(produced) == sorted(outputs)


def test_bls_models_carry_config_voice_bank_and_adapter(built, sources) -> None:
    target, out, configs = built
    settings = RepositorySettings.for_target(target)
    instances = settings.bls_instances
    for name in BLS_MODELS:
        config = configs[name]
        assert config.backend == "python" and config.max_batch_size == 0
        assert [(mc.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in config.instance_group] == [
            ("KIND_CPU", instances)]
        params = {k: v.string_value for k, v in config.parameters.items()}
        assert json.loads(params["voice_bank"]) == VOICE_BANK
        assert ModelConfig.from_dict(json.loads(params["model_config"])) == settings.serving_config(CFG)
        assert params["checkpoint_name"] == sources.checkpoint.name
        assert params[FIRST_CHUNK_FIRST] == "false"
        # what the BLS may merge into one request of each model: that model's max_batch_size
        assert json.loads(params[NETWORK_MAX_BATCH]) == {m: configs[m].max_batch_size for m in (*SPECS, *ENSEMBLES)}
        assert json.loads((out / name / VOICE_BANK_FILE).read_text(encoding="utf-8")) == VOICE_BANK
        adapter = (out / name / "1" / "model.py").read_text()
        assert "from tts_triton.triton.bls import TritonPythonModel  # noqa: F401" in adapter


def test_artifacts_per_target(built) -> None:
    target, out, _ = built
    runtime = RUNTIME_TARGETS[target]
    manifest = read_manifest(out)
    for name in SPECS:
        files = sorted(p.name for p in (out / name / "1").iterdir())
        if runtime.source == "plan":
            assert files == ["model.plan"] and name in manifest["artifacts_sha256"]
        else:
            assert files == sorted([runtime.artifact, *(["model.py"] if runtime.python_model else [])])
    if runtime.python_model:
        adapter = (out / DECODER / "1" / "model.py").read_text()
        assert f"from {runtime.python_model} import TritonPythonModel  # noqa: F401" in adapter


def test_tensorrt_copies_engines(sources, tmp_path: Path) -> None:
    engines = tmp_path / "engines"
    engines.mkdir()
    for name in SPECS:
        (engines / f"{name}.plan").write_bytes(name.encode())
    out = build(sources, tmp_path / "repo", target="tensorrt", engines_dir=engines)
    assert (out / VOCODER / "1" / "model.plan").read_bytes() == b"vocoder"
    (engines / "decoder.plan").unlink()
    with pytest.raises(EnginesMissingError, match=r"missing in .*: decoder\.plan.*-m tts_triton\.export\.tensorrt"):
        build(sources, tmp_path / "other", target="tensorrt", engines_dir=engines)
    assert not (tmp_path / "other").exists()


def test_manifest_decides_rebuilds(sources, tmp_path: Path) -> None:
    out = build(sources, tmp_path / "repo")
    manifest = read_manifest(out)
    assert manifest["target"] == "onnxruntime-python" and len(manifest["checkpoint_sha256"]) == 64
    assert manifest["built_at"] and set(manifest["artifacts_sha256"]) == set(SPECS)
    kwargs = dict(model_config=CFG, checkpoint=sources.checkpoint, voice_bank=sources.voice_bank)
    assert repository_is_current(out, **kwargs)
    assert not repository_is_current(out, **kwargs, target="tensorrt")
    changed = dataclasses.replace(RepositorySettings(), bls_instances=2)
    assert not repository_is_current(out, **kwargs, settings=changed)
    other = tmp_path / "other.pt"
    other.write_bytes(b"other weights")
    assert not repository_is_current(out, **{**kwargs, "checkpoint": other})
    assert not repository_is_current(tmp_path, **kwargs)
    reexported = shutil.copytree(sources.onnx_dir, tmp_path / "onnx")
    assert repository_is_current(out, **kwargs, onnx_dir=reexported)
    with (reexported / f"{VOCODER}.onnx").open("ab") as f:  # new export code, new graph
        f.write(b"\0")
    assert not repository_is_current(out, **kwargs, onnx_dir=reexported)
    manifest["models"].remove(FIRST_DECODE)  # built by code from before the ensemble: the BLS would call a model
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))  # the repository does not have
    assert not repository_is_current(out, **kwargs)


def test_rebuild_replaces_only_repositories(sources, tmp_path: Path) -> None:
    out = tmp_path / "model_repository"
    out.mkdir()
    (out / "README.md").write_text("kept")
    build(sources, out)
    (out / DECODER / "stale.txt").write_text("x")
    build(sources, out, target="onnxruntime")
    assert (out / "README.md").read_text() == "kept" and not (out / DECODER / "stale.txt").exists()
    assert read_manifest(out)["target"] == "onnxruntime"
    assert [p.name for p in tmp_path.iterdir()] == ["model_repository"]  # no staging leftovers

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="refusing"):
        build(sources, foreign)
    assert (foreign / "precious.txt").read_text() == "mine"


def test_onnx_that_breaks_the_contract_fails_the_build_and_keeps_the_old_repository(sources, tmp_path: Path) -> None:
    out = build(sources, tmp_path / "repo")
    before = read_manifest(out)
    wider = dataclasses.replace(CFG, text=dataclasses.replace(CFG.text, dim=CFG.text.dim * 2))
    with pytest.raises(ValueError, match=r"does not match the contract of 'decoder'.*'memory'"):
        build_repository(out, onnx_dir=sources.onnx_dir, model_config=wider, checkpoint=sources.checkpoint,
                         voice_bank=sources.voice_bank)
    assert read_manifest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


def test_bad_inputs_are_rejected(sources, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown runtime target 'jax-tpu'"):
        build(sources, tmp_path / "a", target="jax-tpu")
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps({"voices": []}))
    with pytest.raises(ValueError, match="lacks"):
        build_repository(tmp_path / "b", onnx_dir=sources.onnx_dir, model_config=CFG, checkpoint=sources.checkpoint,
                         voice_bank=bank)
    partial = RepositorySettings(networks={DECODER: RepositorySettings().networks[DECODER]})
    with pytest.raises(ValueError, match="settings configure networks"):
        build(sources, tmp_path / "c", settings=partial)
    with pytest.raises(ValueError, match="bls_call_threads must be >= 0"):
        build(sources, tmp_path / "c", settings=RepositorySettings(bls_call_threads=-1))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli(sources, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model_config = tmp_path / "config.json"
    model_config.write_text(json.dumps(CFG.to_dict()))
    common = ["--onnx-dir", str(sources.onnx_dir), "--voice-bank", str(sources.voice_bank)]
    args = [*common, "--checkpoint", str(sources.checkpoint), "--model-config", str(model_config)]
    assert main([*args, "--out", str(tmp_path / "repo"), "--target", "tensorrt"]) == 1
    assert "(no --engines-dir given); nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "repo").exists()
    assert main([*args, "--out", str(tmp_path / "repo")]) == 0
    assert (tmp_path / "repo" / MANIFEST_FILE).is_file()
    checkpoint = tmp_path / "ckpt.pt"  # the model config is read from the checkpoint when not given
    torch.save({"format": FORMAT, "config": CFG.to_dict()}, checkpoint)
    assert main([*common, "--checkpoint", str(checkpoint), "--out", str(tmp_path / "repo")]) == 0
    assert read_manifest(tmp_path / "repo")["model_config"] == json.loads(json.dumps(CFG.to_dict()))
    assert main([*args, "--out", str(sources.voice_bank)]) == 1
    assert "not a directory" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "repo"), "--first-chunk-first"]) == 0
    assert read_manifest(tmp_path / "repo")["settings"]["first_chunk_first"] is True
    for name in BLS_MODELS:
        config = parse((tmp_path / "repo" / name / "config.pbtxt").read_text())
        assert config.parameters[FIRST_CHUNK_FIRST].string_value == "true"


def test_network_knobs_from_the_command_line() -> None:
    base = RepositorySettings.for_target("torch-cuda")
    assert all(base.networks[n].batch_budget for n in (TEXT_ENCODER, DECODER, VOCODER))
    tuned = settings_mod.tuned(base, {"instances": ["decoder=3"], "max_queue_delay_us": ["vocoder=50"],
                                   "batch_budget": ["text_encoder=1024"], "max_batch_size": ["decoder=128"]})
    assert tuned.networks[DECODER].instances == 3 and tuned.networks[VOCODER].max_queue_delay_us == 50
    assert tuned.networks[TEXT_ENCODER].batch_budget == 1024 and tuned.networks[DECODER].max_batch_size == 128
    assert tuned.networks[DECODER].batch_budget == base.networks[DECODER].batch_budget
    with pytest.raises(ValueError, match="expected NETWORK=N"):
        settings_mod.tuned(base, {"instances": ["decoders=2"]})
    with pytest.raises(ValueError, match="batch_budget must be >= 1"):
        settings_mod.tuned(base, {"batch_budget": ["decoder=0"]}).validate(list(SPECS))



def test_network_fields_override_the_targets_defaults() -> None:
    base = RepositorySettings.for_target("torch-cuda")
    fields = {"vocoder": {"instances": 1, "max_queue_delay_us": 500}}
    tuned = RepositorySettings.for_target("torch-cuda", networks=fields, bls_instances=4)
    assert tuned.networks[VOCODER].instances == 1 and tuned.networks[VOCODER].max_queue_delay_us == 500
    assert tuned.networks[VOCODER].batch_budget == base.networks[VOCODER].batch_budget
    assert tuned.networks[DECODER] == base.networks[DECODER] and tuned.bls_instances == 4
    assert tuned.steps_per_call == base.steps_per_call
    with pytest.raises(ValueError, match="expected a network of"):
        RepositorySettings.for_target("torch-cuda", networks={"vocoder": {"instance": 1}})
    with pytest.raises(ValueError, match="expected a network of"):
        RepositorySettings.for_target("torch-cuda", networks={"vocoders": {"instances": 1}})

# --- onnx_model.py outside Triton -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vocoder_session(sources) -> ort.InferenceSession:
    return ort.InferenceSession(str(sources.onnx_dir / f"{VOCODER}.onnx"), providers=["CPUExecutionProvider"])


def test_io_mismatches(vocoder_session) -> None:
    spec = SPECS[VOCODER]
    assert io_mismatches(vocoder_session, spec.inputs, spec.outputs, batched=True) == []
    renamed = [dataclasses.replace(spec.inputs[0], name="spectrogram")]
    problems = io_mismatches(vocoder_session, renamed, spec.outputs, batched=True)
    assert any("'spectrogram'" in p for p in problems) and any("['mel']" in p for p in problems)
    assert io_mismatches(vocoder_session, spec.inputs, spec.outputs, batched=False)  # rank off by the batch axis


def test_run_batch_equals_one_by_one(vocoder_session) -> None:
    rng = np.random.default_rng(1)
    feeds = [example(SPECS[VOCODER], b, rng, axis_size=7) for b in (1, 3, 2)]
    together = run_batch(vocoder_session, feeds, ["audio"])
    for feed, out in zip(feeds, together, strict=True):
        np.testing.assert_allclose(out["audio"], vocoder_session.run(["audio"], feed)[0], rtol=1e-6)
    other = example(SPECS[VOCODER], 1, rng, axis_size=9)
    assert batch_groups([feeds[0], other, feeds[1]], batched=True) == [[0, 2], [1]]
    assert batch_groups(feeds, batched=False) == [[0], [1], [2]]


def test_triton_python_model_batches_and_isolates_errors(
    sources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tts_triton.triton import utils

    out = build(sources, tmp_path / "repo", include_bls=False)
    for module in (onnx_model, utils):
        monkeypatch.setattr(module, "pb_utils", fake_pb_utils)
    model = onnx_model.TritonPythonModel()
    model.initialize({"model_config": json.dumps(_json_config(out, DECODER)), "model_name": DECODER,
                      "model_repository": str(out / DECODER), "model_version": "1"})
    rng = np.random.default_rng(2)
    good = [example(SPECS[DECODER], b, rng, axis_size=32) for b in (1, 2)]  # 32: a token bucket (shapes.py)
    wrong_dtype = {k: v.astype(np.float64) for k, v in example(SPECS[DECODER], 1, rng, axis_size=32).items()}
    missing = dict(list(good[0].items())[1:])
    request = fake_pb_utils.Request
    requests = [request(good[0]), request(wrong_dtype, requested=["mel"]), request(missing, requested=["mel"]),
                request(good[1], requested=["mel", "gate"])]
    responses = model.execute(requests)
    assert [r.has_error() for r in responses] == [False, True, True, False]
    assert "decoder:" in responses[1].error().message() and "'memory' is missing" in responses[2].error().message()
    assert sorted(responses[0].tensors) == sorted(SPECS[DECODER].output_names)
    assert sorted(responses[3].tensors) == ["gate", "mel"]
    for inputs, response in ((good[0], responses[0]), (good[1], responses[3])):
        expected = model._session.run(["mel"], inputs)[0]
        np.testing.assert_allclose(response.tensors["mel"].as_numpy(), expected, rtol=1e-6)
    model.finalize()


def _json_config(out: Path, name: str) -> dict[str, Any]:
    """The model config as Triton hands it to a Python model (JSON of the message)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(parse((out / name / "config.pbtxt").read_text()), preserving_proto_field_name=True)


# --- a real Triton 2.51 serving an onnxruntime-python repository -------------------------------------------


@pytest.fixture(scope="module")
def served(sources, start_triton: Callable[..., TritonServer], tmp_path_factory: pytest.TempPathFactory):
    networks = dict(RepositorySettings().networks)
    networks[DECODER] = dataclasses.replace(networks[DECODER], max_queue_delay_us=200_000)
    out = build(sources, tmp_path_factory.mktemp("served") / "repo", include_bls=False,
                settings=RepositorySettings(networks=networks))
    server = start_triton(out, extra_args=["--cache-config=local,size=1048576"])
    yield server, out
    server.stop()


def _inputs(spec: ModelSpec, feed: dict[str, np.ndarray]) -> list[httpclient.InferInput]:
    inputs = []
    for t in spec.inputs:
        tensor = httpclient.InferInput(t.name, list(feed[t.name].shape), t.wire_dtype)
        tensor.set_data_from_numpy(feed[t.name])
        inputs.append(tensor)
    return inputs


def test_served_decoder_batches_concurrent_requests(served, sources) -> None:
    server, _ = served
    spec = SPECS[DECODER]
    session = ort.InferenceSession(str(sources.onnx_dir / f"{DECODER}.onnx"), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    feeds = [example(spec, 1, rng, axis_size=32) for _ in range(8)]
    client = httpclient.InferenceServerClient(server.http_url, concurrency=len(feeds))
    pending = [client.async_infer(DECODER, _inputs(spec, feed)) for feed in feeds]
    for feed, request in zip(feeds, pending, strict=True):
        result = request.get_result()
        for name, expected in zip(spec.output_names, session.run(spec.output_names, feed), strict=True):
            np.testing.assert_allclose(result.as_numpy(name), expected, rtol=1e-5, err_msg=name)
    stats = client.get_inference_statistics(DECODER)["model_stats"][0]
    assert stats["inference_count"] == 8
    assert stats["execution_count"] < stats["inference_count"], stats


def test_served_encode_ensemble(served, sources) -> None:
    server, _ = served
    spec = ensemble_spec(CFG, ENCODE)
    feed = example(spec, 2, np.random.default_rng(4), axis_size=64)  # a token bucket and a reference length
    result = httpclient.InferenceServerClient(server.http_url).infer(ENCODE, _inputs(spec, feed))
    for child in (TEXT_ENCODER, STYLE_ENCODER):
        child_spec = SPECS[child]
        session = ort.InferenceSession(str(sources.onnx_dir / f"{child}.onnx"), providers=["CPUExecutionProvider"])
        expected = session.run(child_spec.output_names, {n: feed[n] for n in child_spec.input_names})
        for name, want in zip(child_spec.output_names, expected, strict=True):
            np.testing.assert_allclose(result.as_numpy(name), want, rtol=1e-5, err_msg=name)


def test_served_first_decode_is_the_text_encoder_then_the_decoder(served, sources) -> None:
    """One request of ``first_decode`` answers what the text encoder's outputs fed to the decoder give."""
    server, _ = served
    spec = ensemble_spec(CFG, FIRST_DECODE)
    feed = example(spec, 2, np.random.default_rng(6), axis_size=32)
    result = httpclient.InferenceServerClient(server.http_url).infer(FIRST_DECODE, _inputs(spec, feed))
    expected = dict(feed)
    for child in (TEXT_ENCODER, DECODER):
        child_spec = SPECS[child]
        session = ort.InferenceSession(str(sources.onnx_dir / f"{child}.onnx"), providers=["CPUExecutionProvider"])
        outputs = session.run(child_spec.output_names, {n: expected[n] for n in child_spec.input_names})
        expected.update(zip(child_spec.output_names, outputs, strict=True))
    for name in spec.output_names:
        np.testing.assert_allclose(result.as_numpy(name), expected[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_served_style_encoder_uses_the_response_cache(served) -> None:
    server, _ = served
    spec = SPECS[STYLE_ENCODER]
    client = httpclient.InferenceServerClient(server.http_url)
    feed = example(spec, 1, np.random.default_rng(5), axis_size=64)
    first, second = (client.infer(STYLE_ENCODER, _inputs(spec, feed)) for _ in range(2))
    np.testing.assert_array_equal(first.as_numpy("style"), second.as_numpy("style"))
    stats = client.get_inference_statistics(STYLE_ENCODER)["model_stats"][0]["inference_stats"]
    assert stats["cache_hit"]["count"] >= 1, stats
