"""The ``torch-cuda`` target on the CPU: bucket padding, fp16 numerics, generated configs, a real Triton serving it.

CI has no GPU, so CUDA graphs are not captured here; the runner's padded eager path computes what a
graph computes (same padded batch), and the served test runs the target's models with KIND_CPU.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from conftest import SENTENCE_IDS
from waiting import wait_until

from tts_triton.core import audio, contract, shapes
from tts_triton.core.audio import snr_db
from tts_triton.core.config import STREAMING
from tts_triton.core.layout import CHECKPOINT_FILE, VOICE_BANK_FILE
from tts_triton.core.voices import VoiceBank
from tts_triton.engine.batching import Padding, batch_groups, merge, split
from tts_triton.engine.graphs import StageRunner
from tts_triton.export.pbtxt import parse
from tts_triton.export.repository import RepositorySettings, build_repository
from tts_triton.models.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint
from tts_triton.models.stages import half_precision
from tts_triton.serving.in_process import TorchBackend
from tts_triton.serving.pipeline import Pipeline, first_stop, pad_tokens
from tts_triton.serving.voice import Voice
from tts_triton.text import text_to_sequences
from tts_triton.triton.torch_model import PHASE_METRIC, PHASES, instance_device


@pytest.fixture(scope="module")
def default_voice() -> Checkpoint:
    return load_checkpoint(DEFAULT_CHECKPOINT)


def decoder_feed(checkpoint: Checkpoint, ids: list[int], seed: int) -> dict[str, np.ndarray]:
    """A decoder request of batch 1 in the smallest token bucket: real encoder memory, a random style and state."""
    stages = checkpoint.stages()
    tokens = STREAMING.bucket(len(ids))
    phonemes = np.zeros((1, tokens), np.int32)
    phonemes[0, : len(ids)] = ids
    mask = (phonemes > 0).astype(np.float32)
    with torch.inference_mode():
        (memory,) = stages[contract.TEXT_ENCODER](torch.from_numpy(phonemes), torch.from_numpy(mask))
    rng = np.random.default_rng(seed)
    feed = {"memory": memory.numpy(), "mask": mask,
            "style": rng.standard_normal((1, checkpoint.config.style.dim)).astype(np.float32) * 0.3}
    for spec in contract.decoder_states(checkpoint.config):
        dims = [tokens if d == contract.TOKENS else d for d in spec.dims]
        feed[spec.name] = rng.standard_normal((1, *dims)).astype(np.float32) * 0.1
    return feed


def test_padded_batches_give_each_row_its_own_result(tiny_checkpoint: Checkpoint) -> None:
    spec = contract.decoder_spec(tiny_checkpoint.config)
    runner = StageRunner(tiny_checkpoint.stages()[contract.DECODER], spec, max_batch_size=8)
    feeds = [decoder_feed(tiny_checkpoint, SENTENCE_IDS[: 10 + 5 * i], seed=i) for i in range(3)]
    batched = runner.run(feeds)  # three rows padded to the batch bucket 4
    alone = StageRunner(tiny_checkpoint.stages()[contract.DECODER], spec, max_batch_size=1)
    for feed, result in zip(feeds, batched, strict=True):
        single = alone.run([feed])[0]
        assert sorted(result) == sorted(spec.output_names)
        for name in spec.output_names:
            assert result[name].shape == single[name].shape
            np.testing.assert_allclose(result[name], single[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_a_batch_budget_bounds_rows_times_tokens_and_splits_bigger_batches(tiny_checkpoint: Checkpoint) -> None:
    spec = contract.decoder_spec(tiny_checkpoint.config)
    stage = tiny_checkpoint.stages()[contract.DECODER]
    budgeted = StageRunner(stage, spec, max_batch_size=8, batch_budget=128)
    unbounded = StageRunner(stage, spec, max_batch_size=8)

    def input_shapes(tokens: int) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(tokens if d == contract.TOKENS else d for d in t.dims) for t in spec.inputs)

    assert [budgeted.max_rows(input_shapes(n)) for n in (32, 64, 128, 256)] == [4, 2, 1, 1]  # at least one row
    assert unbounded.max_rows(input_shapes(256)) == 8
    feeds = [decoder_feed(tiny_checkpoint, SENTENCE_IDS[: 8 + i], seed=i) for i in range(6)]
    assert {f["memory"].shape[1] for f in feeds} == {32}  # one group of six rows: calls of 4 and 2
    for got, want in zip(budgeted.run(feeds), unbounded.run(feeds), strict=True):
        for name in spec.output_names:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_requests_in_other_token_buckets_run_as_one_padded_call(tiny_checkpoint: Checkpoint) -> None:
    """The decoder ignores zero padding along the token axis: a 32-token and a 64-token request (and the
    text encoder's) run as one call padded to 64 tokens and give what each gives alone, at its own length."""
    stages, specs = tiny_checkpoint.stages(), contract.network_specs(tiny_checkpoint.config)
    feeds = [decoder_feed(tiny_checkpoint, (SENTENCE_IDS * 4)[:n], seed=n) for n in (12, 40, 20)]
    assert [f["memory"].shape[1] for f in feeds] == [32, 64, 32]
    runner = StageRunner(stages[contract.DECODER], specs[contract.DECODER], max_batch_size=4)
    assert batch_groups(feeds, padding=runner.padding) == [[0, 1, 2]]
    assert batch_groups(feeds) == [[0, 2], [1]]
    for feed, result in zip(feeds, runner.run(feeds), strict=True):
        single = runner.run([feed])[0]
        for name in specs[contract.DECODER].output_names:
            assert result[name].shape == single[name].shape, name
            np.testing.assert_allclose(result[name], single[name], rtol=1e-5, atol=1e-5, err_msg=name)
    encoder = StageRunner(stages[contract.TEXT_ENCODER], specs[contract.TEXT_ENCODER], max_batch_size=4)
    ids = [(SENTENCE_IDS * 4)[:n] for n in (9, 50)]
    texts = [dict(zip(("phonemes", "mask"), pad_tokens(i, STREAMING.bucket(len(i))), strict=True)) for i in ids]
    for feed, result in zip(texts, encoder.run(texts), strict=True):
        single = encoder.run([feed])[0]
        np.testing.assert_allclose(result["memory"], single["memory"], rtol=1e-5, atol=1e-5)


def test_padding_merges_and_cuts_back_along_masked_axes_only() -> None:
    spec = contract.ModelSpec("toy", inputs=(contract.TensorSpec("x", "float32", (contract.TOKENS, 2)),),
                              outputs=(contract.TensorSpec("y", "float32", (3, contract.TOKENS)),
                                       contract.TensorSpec("z", "float32", (4,))), masked_axes=(contract.TOKENS,))
    padding = Padding.of(spec)
    assert not Padding.of(dataclasses.replace(spec, masked_axes=()))
    assert padding.inputs == {"x": {1: contract.TOKENS}} and padding.outputs == {"y": {2: contract.TOKENS}}
    feeds = [{"x": np.ones((1, 3, 2), np.float32)}, {"x": np.full((2, 5, 2), 2, np.float32)}]
    merged = merge(feeds, padding)
    assert merged["x"].shape == (3, 5, 2) and merged["x"][0, 3:].sum() == 0
    outputs = {"y": np.arange(3 * 3 * 5, dtype=np.float32).reshape(3, 3, 5), "z": np.zeros((3, 4), np.float32)}
    first, second = split(outputs, feeds, padding)
    assert first["y"].shape == (1, 3, 3) and second["y"].shape == (2, 3, 5) and second["z"].shape == (2, 4)
    np.testing.assert_array_equal(first["y"][0], outputs["y"][0, :, :3])


def test_requests_of_other_shapes_run_apart_in_arrival_order(tiny_checkpoint: Checkpoint) -> None:
    spec = contract.vocoder_spec(tiny_checkpoint.config)
    runner = StageRunner(tiny_checkpoint.stages()[contract.VOCODER], spec, max_batch_size=4)
    rng = np.random.default_rng(3)
    feeds = [{"mel": rng.standard_normal((rows, frames, tiny_checkpoint.config.n_mels)).astype(np.float32) - 5}
             for rows, frames in ((1, 24), (2, 48), (3, 24))]
    results = runner.run(feeds)  # 1 + 3 rows of 24 frames merge into 4; the 48-frame request runs alone
    with torch.inference_mode():
        for feed, result in zip(feeds, results, strict=True):
            expected = tiny_checkpoint.stages()[contract.VOCODER](torch.from_numpy(feed["mel"]))[0].numpy()
            assert result["audio"].shape == expected.shape
            np.testing.assert_allclose(result["audio"], expected, rtol=1e-4, atol=1e-5)


def test_graphs_cover_every_shape_the_decode_loop_sends(checkpoint: Checkpoint) -> None:
    axes = shapes.axis_values()
    stages = checkpoint.stages()
    specs = contract.network_specs(checkpoint.config)
    decoder = StageRunner(stages[contract.DECODER], specs[contract.DECODER], max_batch_size=128)
    assert decoder.batch_sizes == (1, 2, 4, 8, 16, 32, 64, 128)
    assert len(decoder.graph_shapes()) == len(axes[contract.TOKENS].buckets)
    vocoder = StageRunner(stages[contract.VOCODER], specs[contract.VOCODER], max_batch_size=32)
    assert sorted(s[0][0] for s in vocoder.graph_shapes()) == list(STREAMING.vocoder_frames)
    # reference mels take any length in a range: the style encoder runs eagerly
    assert StageRunner(stages[contract.STYLE_ENCODER], specs[contract.STYLE_ENCODER]).graph_shapes() == []


def test_fp16_vocoder_stage_keeps_quality_on_speech_mels(default_voice: Checkpoint) -> None:
    """The shipped vocoder in fp16 (its mel match in fp32) on one chunk of a speech mel (espeak-ng): the plumbing
    and a quality floor. CPU fp16 convolutions are slow (seconds per chunk); the full-size fp16 numerics on decoder
    output belong to the GPU benchmark."""
    from tts_triton.data import prosody

    speech = prosody.render("Please turn left at the next corner.", prosody.VOICES["f1"], prosody.EMOTIONS["neutral"])
    mel = audio.mel_spectrogram(speech)
    vocoder = default_voice.stages()[contract.VOCODER]
    half = half_precision(copy.deepcopy(vocoder))
    assert half.mel_match.stft.basis.dtype == torch.float32
    assert any(p.dtype == torch.float16 for p in half.generator.parameters())
    frames = STREAMING.chunk_frames[1]  # a streamed chunk of a sentence after its first
    start = (len(mel) - frames) // 2  # mid-sentence: voiced speech, not the silence at its ends
    window = torch.from_numpy(mel[None, start : start + frames].copy())
    with torch.inference_mode():
        reference = vocoder(window)[0].numpy()
        test = half(window.half())[0].float().numpy()
    assert snr_db(reference, test) >= 30.0


def test_fp16_decoder_stops_at_the_same_step(tiny_checkpoint: Checkpoint, test_style: np.ndarray) -> None:
    """A small decoder whose stop gate is calibrated (conftest), in fp16: the same steps as in fp32."""
    cfg = tiny_checkpoint.config
    half_stages = {**tiny_checkpoint.stages()}
    half_stages[contract.DECODER] = half_precision(tiny_checkpoint.stages()[contract.DECODER])

    class HalfDecoder(TorchBackend):
        async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            if model != contract.DECODER:
                return await super().infer(model, inputs)
            spec = self.specs[model]
            with torch.inference_mode():
                outputs = self.stages[model](*(torch.from_numpy(inputs[n]).half() if inputs[n].dtype == np.float32
                                               else torch.from_numpy(inputs[n]) for n in spec.input_names))
            return {name: out.float().numpy() for name, out in zip(spec.output_names, outputs, strict=True)}

    steps = []
    for backend in (TorchBackend(tiny_checkpoint.stages(), cfg), HalfDecoder(half_stages, cfg)):
        pipeline = Pipeline(backend, cfg)
        asyncio.run(pipeline.synthesize([SENTENCE_IDS], test_style[: cfg.style.dim]))
        steps.append([s.steps for s in pipeline.stats])
        assert not any(s.hit_max_steps for s in pipeline.stats)
    assert steps[0] == steps[1]
    assert first_stop(np.array([-1.0, 0.5])) == 1


def test_instance_device_follows_the_instance_kind() -> None:
    assert instance_device({"model_instance_kind": "CPU", "model_instance_device_id": "0"}).type == "cpu"
    assert instance_device({"model_instance_kind": "GPU", "model_instance_device_id": "1"}) == torch.device("cuda", 1)


# --- generated repository ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_repository(checkpoint_file: Path, model_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The torch-cuda repository of the test checkpoint, its networks on the CPU (fp32: compared to the reference),
    its BLS putting each stream's first chunk first (the ONNX repositories of the other server tests do not)."""
    from tts_triton.models.checkpoint import load_checkpoint

    cfg = load_checkpoint(checkpoint_file).config
    settings = RepositorySettings.for_target("torch-cuda", instance_kind="KIND_CPU", fp16=False,
                                             first_chunk_first=True)
    out = tmp_path_factory.mktemp("torch") / "model_repository"
    return build_repository(out, model_config=cfg, checkpoint=checkpoint_file,
                            voice_bank=model_repository / contract.TTS / VOICE_BANK_FILE, target="torch-cuda",
                            settings=settings)


def test_torch_cuda_configs(checkpoint_file: Path, model_repository: Path, tmp_path: Path) -> None:
    cfg = load_checkpoint(checkpoint_file).config
    bank = model_repository / contract.TTS / VOICE_BANK_FILE
    out = build_repository(tmp_path / "repo", model_config=cfg, checkpoint=checkpoint_file, voice_bank=bank,
                           target="torch-cuda", settings=RepositorySettings.for_target("torch-cuda", steps_per_call=16))
    for name in contract.network_specs(cfg):
        config = parse((out / name / "config.pbtxt").read_text())
        assert config.backend == "python"
        assert [g.kind for g in config.instance_group] == [config.instance_group[0].KIND_GPU]
        assert config.parameters["fp16"].string_value == "true"
        assert (out / name / "1" / CHECKPOINT_FILE).read_bytes() == checkpoint_file.read_bytes()
        assert "tts_triton.triton.torch_model" in (out / name / "1" / "model.py").read_text()
        # requests of other lengths batch together; the model groups (and pads) them itself
        assert [t.allow_ragged_batch for t in config.input] == [-1 in t.dims for t in config.input]
        served = contract.network_specs(RepositorySettings(steps_per_call=16).serving_config(cfg))[name]
        assert [list(t.dims) for t in config.output] == [t.triton_dims for t in served.outputs]
    decoder = parse((out / contract.DECODER / "config.pbtxt").read_text())
    assert [list(t.dims) for t in decoder.output if t.name == "gate"] == [[16]]
    gpu = RepositorySettings.for_target("torch-cuda").networks[contract.DECODER]
    assert decoder.max_batch_size == gpu.max_batch_size
    with pytest.raises(ValueError, match="steps_per_call"):
        build_repository(tmp_path / "onnx", onnx_dir=tmp_path, model_config=cfg, checkpoint=checkpoint_file,
                         voice_bank=bank, settings=RepositorySettings(steps_per_call=16))


def test_served_torch_target_matches_the_reference(torch_repository: Path, start_triton, checkpoint: Checkpoint,
                                                   test_style: np.ndarray) -> None:
    from tts_triton.client import TTSClient

    server = start_triton(torch_repository)
    text = "The quick brown fox jumps over the lazy dog."
    with TTSClient(server.grpc_url, timeout=120) as client:
        streamed = client.synthesize(text, voice="f2", return_mel=True)
    bank = VoiceBank.load(torch_repository / contract.TTS / VOICE_BANK_FILE)
    reference = Voice(checkpoint).pipeline()
    ref_audio, ref_mel = asyncio.run(reference.synthesize(text_to_sequences(text), bank.style("f2")))
    assert streamed.mel.shape == ref_mel.shape
    assert np.abs(streamed.mel - ref_mel).max() <= 1e-3
    assert snr_db(ref_audio, streamed.audio) >= 30.0

    # each network model counts where its execute time went (sent within half a second)
    def phase_seconds() -> dict[tuple[str, str], float]:
        with urllib.request.urlopen(server.metrics_url, timeout=10) as page:
            lines = [line for line in page.read().decode().splitlines() if line.startswith(PHASE_METRIC + "{")]
        return {(m["model"], m["phase"]): float(line.rsplit(" ", 1)[1])
                for line in lines for m in [dict(re.findall(r'(\w+)="([^"]*)"', line))]}

    networks = (contract.TEXT_ENCODER, contract.DECODER, contract.VOCODER)
    wait_until(lambda: all(phase_seconds().get((n, p), 0) > 0 for n in networks for p in PHASES), 10, "the phases")
    seconds = phase_seconds()
    assert seconds[(contract.DECODER, "run")] > seconds[(contract.DECODER, "responses")]

    # a direct call outside the shapes the decode loop sends is refused before any work
    with grpcclient.InferenceServerClient(server.grpc_url) as direct:
        mel = grpcclient.InferInput("mel", [1, 25, checkpoint.config.n_mels], "FP32")
        mel.set_data_from_numpy(np.zeros((1, 25, checkpoint.config.n_mels), np.float32))
        with pytest.raises(grpcclient.InferenceServerException, match="frames = 25") as err:
            direct.infer(contract.VOCODER, [mel])
        assert "INVALID_ARG" in str(err.value.status()) or "400" in str(err.value.status())


def test_steps_per_call_changes_only_the_served_config(checkpoint: Checkpoint) -> None:
    settings = RepositorySettings(steps_per_call=4)
    served = settings.serving_config(checkpoint.config)
    assert served.decoder.steps_per_call == 4 and served.decoder.frames_per_call == 4 * served.decoder.frames_per_step
    assert dataclasses.replace(served.decoder, steps_per_call=checkpoint.config.decoder.steps_per_call) == \
        checkpoint.config.decoder
    stage = checkpoint.stages(served)[contract.DECODER]
    assert stage.steps == 4
