"""The STFT-predicting generator: the exact STFT round trip under it, its reach against the served vocoder
context, fp16 and ONNX plumbing, and a vocoder run that switches a checkpoint to it."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx_ops import FORBIDDEN_OPS, TENSORRT_ONNX_OPS

from tts_triton.core import audio, contract, fundamental
from tts_triton.core.config import VOCOS_VARIANTS, ModelConfig, StreamingConfig, VocoderConfig
from tts_triton.core.fundamental import FundamentalTrack
from tts_triton.export.onnx_export import example_inputs, export_stage
from tts_triton.models.checkpoint import init_checkpoint, load_checkpoint
from tts_triton.models.stages import half_precision
from tts_triton.models.stft import FrameIstft, FrameStft
from tts_triton.models.vocos import VocosGenerator
from tts_triton.serving.in_process import TorchBackend
from tts_triton.serving.pipeline import ChunkPlanner, ChunkWindow, Pipeline
from tts_triton.training import merge
from tts_triton.training.runs import start_run

VOCOS = VocoderConfig("vocos")


@pytest.fixture(scope="module")
def generator() -> VocosGenerator:
    torch.manual_seed(0)
    return VocosGenerator(VOCOS).eval()


def test_the_stft_of_the_mel_frames_inverts_exactly() -> None:
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 40 * audio.HOP_LENGTH)).astype(np.float32))
    real, imag = FrameStft()(x)
    assert real.shape == (2, audio.N_FFT // 2 + 1, 40)
    np.testing.assert_allclose(FrameIstft()(real, imag).numpy(), x.numpy(), atol=1e-5)
    # its magnitudes are the ones the mel is made of
    mel = np.log(np.clip(np.asarray(audio.mel_filterbank()) @ np.sqrt(real[0].numpy() ** 2 + imag[0].numpy() ** 2
                                                                      + audio.MAGNITUDE_EPS), audio.LOG_CLAMP, None))
    np.testing.assert_allclose(mel.T, audio.mel_spectrogram(x[0].numpy()), atol=1e-3)


def test_audio_of_frames_times_hop_within_full_scale(generator: VocosGenerator) -> None:
    mel = torch.randn(2, audio.N_MELS, 30) * 4.0
    with torch.inference_mode():
        out = generator(mel)
    assert out.shape == (2, 1, 30 * audio.HOP_LENGTH) and out.dtype == torch.float32
    assert float(out.abs().max()) <= 1.0


@pytest.mark.parametrize("variant", sorted(VOCOS_VARIANTS))
def test_each_variant_reaches_no_further_than_the_served_vocoder_context(variant: str) -> None:
    """A sample depends only on the frames within ``receptive_field`` of its own: so a streamed window with
    the served context gives the audio one-shot vocoding gives."""
    cfg = VocoderConfig(variant)
    reach = VocosGenerator.receptive_field(cfg)
    assert reach <= min(StreamingConfig().left_context, StreamingConfig().right_context)
    torch.manual_seed(1)
    gen = VocosGenerator(cfg).eval()
    frames, poked, hop = 60, 30, audio.HOP_LENGTH
    mel = torch.randn(1, cfg.n_mels, frames) - 4.0
    changed = mel.clone()
    changed[:, :, poked] += 3.0
    with torch.inference_mode():
        delta = (gen(changed) - gen(mel)).abs()[0, 0].view(frames, hop).amax(dim=1)
    moved = torch.nonzero(delta > 0).flatten()
    assert poked - reach <= int(moved.min()) and int(moved.max()) <= poked + reach
    assert int(moved.max()) - int(moved.min()) >= reach  # the bound is near what it reaches


def test_fp16_keeps_the_inverse_stft_in_fp32_and_the_audio(generator: VocosGenerator) -> None:
    half = half_precision(copy.deepcopy(generator))
    assert half.istft.basis.dtype == torch.float32 and half.head.weight.dtype == torch.float16
    assert half.istft.basis.equal(generator.istft.basis)  # rebuilt exactly, not rounded through fp16
    mel = torch.randn(1, audio.N_MELS, 48) - 4.0
    with torch.inference_mode():
        full, reduced = generator(mel), half(mel.half())
    assert reduced.dtype == torch.float32
    snr = 10 * torch.log10(full.pow(2).mean() / (full - reduced).pow(2).mean())
    assert snr >= 40.0  # the served precision (62 dB measured: the head and the inverse STFT run in fp32)


def test_fp16_keeps_the_harmonic_phase_in_fp32(generator: VocosGenerator) -> None:
    """The served fp16 stage: the model's buffers rebuilt exactly in fp32, and a track sent in fp16 (as the torch-cuda
    target casts its inputs) changes the audio no more than fp16 does elsewhere."""
    half = half_precision(copy.deepcopy(generator))
    assert half.harmonic.envelope_phase.dtype == torch.float32
    assert half.harmonic.envelope_phase.equal(generator.harmonic.envelope_phase)
    t = np.arange(audio.SAMPLE_RATE // 2) / audio.SAMPLE_RATE
    speech = 0.3 * sum(np.sin(2 * np.pi * h * 220.0 * t) / h for h in range(1, 30))
    mel = audio.mel_spectrogram(speech.astype(np.float32))
    track = torch.from_numpy(fundamental.track(mel))[None]
    assert (track[0, 5:-5, 0] > 0).all()  # the model is in play
    x = torch.from_numpy(mel).T[None]
    with torch.inference_mode():
        full, reduced = generator(x, track), half(x.half(), track.half())
    snr = 10 * torch.log10(full.pow(2).mean() / (full - reduced).pow(2).mean())
    assert snr >= 30.0


def test_the_vocoder_stage_exports_to_onnx_equal_to_pytorch(tmp_path: Path) -> None:
    config = ModelConfig(vocoder=VOCOS)
    stage = init_checkpoint(config, seed=4).stages()[contract.VOCODER]
    spec = contract.network_specs(config)[contract.VOCODER]
    path = export_stage(stage, spec, tmp_path / "vocoder.onnx")
    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert {"Cos", "Sin", "LayerNormalization"} <= ops <= TENSORRT_ONNX_OPS and not ops & FORBIDDEN_OPS
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, frames in ((1, 48), (3, 96)):
        inputs = example_inputs(spec, batch=batch, sizes={contract.FRAMES: frames}, seed=frames)
        with torch.no_grad():
            (expected,) = stage(*inputs.values())
        (actual,) = session.run(spec.output_names, {k: v.numpy() for k, v in inputs.items()})
        assert actual.shape == (batch, frames * audio.HOP_LENGTH)
        assert np.abs(actual - expected.numpy()).max() <= 1e-4 * max(float(expected.abs().max()), 1e-3)


def test_a_vocoder_run_switches_generators_and_merge_joins_the_runs(tmp_path: Path) -> None:
    shipped = tmp_path / "v2.pt"
    ckpt = init_checkpoint(ModelConfig(), seed=5)
    ckpt.info = {"acoustic": {"steps": 5}, "vocoder": {"steps": 9}}
    ckpt.save(shipped)
    fresh, state = start_run(tmp_path / "run", False, shipped, ModelConfig(), 7, new_generator="vocos")
    assert state is None and fresh.config.vocoder.variant == "vocos" and "vocoder" not in fresh.info
    assert isinstance(fresh.generator, VocosGenerator) and fresh.info["acoustic"] == {"steps": 5}
    same, _ = start_run(tmp_path / "run", False, shipped, ModelConfig(), 7, new_generator="v2")
    assert same.info["vocoder"] == {"steps": 9}  # the variant it has: nothing changes

    fresh.info["vocoder"] = {"steps": 3}
    fresh.save(tmp_path / "vocos.pt")
    joined = merge.merge(load_checkpoint(shipped), load_checkpoint(tmp_path / "vocos.pt"))
    assert joined.trained and joined.config.vocoder.variant == "vocos"
    assert joined.config == dataclasses.replace(ckpt.config, vocoder=VOCOS)
    other = dataclasses.replace(ModelConfig(), decoder=dataclasses.replace(ModelConfig().decoder, frames_per_step=2))
    with pytest.raises(ValueError, match="beyond the generator"):
        merge.merge(load_checkpoint(shipped), init_checkpoint(other))


def test_streamed_windows_with_the_harmonic_phase_equal_one_shot_vocoding() -> None:
    """The fundamental's phase runs through the whole sentence: each window gets its share of the running track,
    so a stream of many seams is one-shot vocoding of the sentence in silence (its phase 0 at its first frame)."""
    config = ModelConfig(vocoder=VOCOS)
    stages = init_checkpoint(config, seed=4).stages()
    t = np.arange(2 * audio.SAMPLE_RATE) / audio.SAMPLE_RATE
    f0 = 210.0 + 40.0 * np.sin(2 * np.pi * t)
    phase = 2 * np.pi * np.cumsum(f0) / audio.SAMPLE_RATE
    speech = 0.3 * sum(np.sin(h * phase) / h for h in range(1, 30))
    mel = audio.mel_spectrogram(speech.astype(np.float32))
    pipeline = Pipeline(TorchBackend(stages, config), config)
    planner = ChunkPlanner(StreamingConfig(chunk_frames=(8, 16, 32)))
    track, chunks = FundamentalTrack(), []
    for available in range(16, len(mel) + 16, 16):
        track.extend(mel[available - 16 : available])
        while (window := planner.next_window(min(available, len(mel)), available >= len(mel))) is not None:
            chunks.append(asyncio.run(pipeline.vocode(mel, window, track=track)))
    streamed = np.concatenate(chunks)
    vocoder, lead = stages[contract.VOCODER], 32  # one-shot after the silence the first windows see
    whole = torch.from_numpy(np.concatenate([np.full((lead, audio.N_MELS), audio.SILENCE_LOG_MEL, np.float32), mel]))
    with torch.no_grad():
        (one_shot,) = vocoder(whole[None], *vocoder.track(whole[None], lead))
        plain = vocoder.generator(vocoder.postnet(whole[None]).transpose(1, 2))
    one_shot, plain = (x.reshape(-1)[lead * audio.HOP_LENGTH :].numpy() for x in (one_shot, plain))
    assert len(chunks) >= 5 and streamed.shape == one_shot.shape
    assert 10 * np.log10(np.sum(one_shot**2) / np.sum((streamed - one_shot) ** 2)) >= 30.0
    assert not np.allclose(plain, one_shot, atol=1e-3)  # the harmonic phase was in play
    with pytest.raises(ValueError, match="fundamental track"):
        asyncio.run(pipeline.vocode(mel, ChunkWindow(-8, 0, 8, 24)))
