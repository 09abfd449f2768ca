"""The mel match: exact STFT round trip, gains that land on the requested mel, clipping, wiring."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tts_triton.core import audio, contract
from tts_triton.core.config import ModelConfig, VocoderConfig
from tts_triton.models.acoustic import AcousticModel
from tts_triton.models.hifigan import Generator
from tts_triton.models.mel_match import MelMatch
from tts_triton.models.stages import VocoderStage, build_stages

FRAMES = 48


@pytest.fixture(scope="module")
def noise() -> np.ndarray:
    """Coloured noise: energy falling with frequency, so bands differ."""
    rng = np.random.default_rng(0)
    white = rng.standard_normal(FRAMES * audio.HOP_LENGTH)
    return (np.convolve(white, np.ones(8) / 8, mode="same") * 0.2).astype(np.float32)


def _match(samples: np.ndarray, log_mel: np.ndarray, max_log_gain: float = 4.0) -> np.ndarray:
    with torch.inference_mode():
        out = MelMatch(max_log_gain)(torch.from_numpy(samples)[None], torch.from_numpy(log_mel)[None])
    assert out.shape == (1, len(samples))
    return out[0].numpy()


def test_the_audio_own_mel_gives_it_back_unchanged(noise: np.ndarray) -> None:
    np.testing.assert_allclose(_match(noise, audio.mel_spectrogram(noise)), noise, atol=1e-5)


def test_no_gain_allowed_is_an_exact_stft_round_trip(noise: np.ndarray) -> None:
    np.testing.assert_allclose(_match(noise, np.zeros((FRAMES, audio.N_MELS), np.float32), 0.0), noise, atol=1e-5)


def test_the_output_mel_follows_the_requested_one(noise: np.ndarray) -> None:
    mel = audio.mel_spectrogram(noise)
    tilt = np.linspace(-1.0, 1.0, audio.N_MELS, dtype=np.float32)  # darker lows, brighter highs
    target = mel + tilt
    before = np.abs(mel - target)[2:-2].mean()
    after = np.abs(audio.mel_spectrogram(_match(noise, target)) - target)[2:-2].mean()
    assert before == pytest.approx(0.5, abs=0.01)
    assert after < 0.1 * before


def test_gains_are_clipped(noise: np.ndarray) -> None:
    mel = audio.mel_spectrogram(noise)
    out = audio.mel_spectrogram(_match(noise, mel + 10.0, max_log_gain=2.0))
    np.testing.assert_allclose(np.median(out - mel), 2.0, atol=0.05)


def test_the_vocoder_stage_applies_it_unless_turned_off() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig()
    assert cfg.vocoder.mel_match > 0
    stage = build_stages(AcousticModel(cfg), Generator(cfg.vocoder))[contract.VOCODER]
    assert isinstance(stage.mel_match, MelMatch)
    off = VocoderStage(stage.postnet, stage.generator, VocoderConfig(mel_match=0.0).mel_match)
    assert off.mel_match is None
    mel = torch.randn(1, 16, cfg.n_mels) - 4.0
    with torch.inference_mode():
        raw = off(mel)[0]
        matched = stage(mel)[0]
        post = stage.postnet(mel)
    assert raw.shape == matched.shape == (1, 16 * audio.HOP_LENGTH)
    torch.testing.assert_close(matched, stage.mel_match(raw, post))
    assert not torch.allclose(matched, raw)
