"""The mel's fundamental (tts_triton.core.fundamental) and the harmonic phase the vocoder draws from it
(tts_triton.models.harmonic): the estimate on tones of known pitch, the track grown in pieces against the whole,
the envelope's phase against a filter that is minimum-phase by construction, and what the phase model replaces."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tts_triton.core import audio, fundamental
from tts_triton.models.harmonic import HarmonicPhase, harmonic_bins
from tts_triton.models.stft import BINS


def tone(f0: np.ndarray, harmonics: int = 30) -> np.ndarray:
    """A sawtooth-like harmonic tone following ``f0`` (Hz per sample), harmonics up to 8 kHz."""
    phase = 2 * np.pi * np.cumsum(f0) / audio.SAMPLE_RATE
    out = sum(np.where(h * f0 < 8000, np.sin(h * phase) / h, 0.0) for h in range(1, harmonics + 1))
    return (0.3 * out).astype(np.float32)


def at_frames(f0: np.ndarray, frames: int) -> np.ndarray:
    """``f0`` per sample at each frame's centre (frame ``k`` is centred on sample ``k * hop + hop / 2``)."""
    return f0[np.arange(frames) * audio.HOP_LENGTH + audio.HOP_LENGTH // 2]


@pytest.mark.parametrize("hz", [120.0, 170.0, 220.0, 300.0, 420.0])
def test_estimate_finds_the_fundamental_of_a_gliding_tone(hz: float) -> None:
    t = np.arange(audio.SAMPLE_RATE) / audio.SAMPLE_RATE
    f0 = hz * (1.0 + 0.08 * np.sin(2 * np.pi * 1.5 * t))
    mel = audio.mel_spectrogram(tone(f0))
    estimate = fundamental.estimate(mel)[4:-4]  # the reflect padding blurs the edges
    error = np.abs(estimate / at_frames(f0, len(mel))[4:-4] - 1.0)
    assert np.median(error) < 0.005 and error.max() < 0.03


def test_low_voices_and_silence_keep_the_vocoders_phase() -> None:
    mel = audio.mel_spectrogram(tone(np.full(audio.SAMPLE_RATE // 2, 85.0)))
    assert not fundamental.estimate(mel).any()  # below MIN_F0
    silence = np.full((5, audio.N_MELS), audio.SILENCE_LOG_MEL, np.float32)
    assert not fundamental.estimate(silence).any()


def test_a_track_grown_in_pieces_is_the_whole_sentences_track() -> None:
    t = np.arange(audio.SAMPLE_RATE) / audio.SAMPLE_RATE
    mel = audio.mel_spectrogram(tone(200.0 + 30.0 * np.sin(2 * np.pi * t)))
    grown = fundamental.FundamentalTrack()
    for lo, hi in ((0, 7), (7, 8), (8, 40), (40, len(mel))):
        grown.extend(mel[lo:hi])
    whole = fundamental.track(mel)
    np.testing.assert_allclose(grown.window(0, len(mel)), whole, atol=1e-4)
    np.testing.assert_allclose(grown.window(30, 50), whole[30:50], atol=1e-4)
    # a window reaching before the sentence: the silence the planner pads with, the phase still 0 at frame 0
    lead = 6
    padded = np.concatenate([np.full((lead, audio.N_MELS), audio.SILENCE_LOG_MEL, np.float32), mel])
    ahead, reference = grown.window(-lead, 20), fundamental.track(padded, lead)[:lead + 20]
    np.testing.assert_allclose(ahead[:, 0], reference[:, 0], atol=1e-3)
    np.testing.assert_allclose(np.cos(ahead[:, 1]), np.cos(reference[:, 1]), atol=1e-4)
    assert ahead[lead, 1] == 0.0
    # the phase advances by the fundamental over each hop
    step = np.diff(np.unwrap(whole[:, 1]))
    expected = math.pi * (whole[1:, 0] + whole[:-1, 0]) * audio.HOP_LENGTH / audio.SAMPLE_RATE
    np.testing.assert_allclose(np.mod(step - expected + np.pi, 2 * np.pi) - np.pi, 0.0, atol=1e-4)
    with pytest.raises(ValueError, match="frames up to"):
        grown.window(0, len(mel) + 1)


def test_the_envelope_phase_is_the_minimum_phase_of_a_resonator() -> None:
    """Two resonances built from poles inside the unit circle: minimum-phase, so the phase the module derives from
    the log-magnitude alone is the filter's own."""
    poles = [0.93 * np.exp(1j * 2 * np.pi * f / audio.SAMPLE_RATE) for f in (300.0, 900.0)]
    w = 2 * np.pi * np.arange(BINS) / audio.N_FFT
    response = np.prod([1.0 / ((1 - p * np.exp(-1j * w)) * (1 - np.conj(p) * np.exp(-1j * w))) for p in poles], 0)
    log_magnitude = torch.from_numpy(np.log(np.abs(response))).float().view(1, BINS, 1)
    module = HarmonicPhase()
    theta = torch.matmul(module.envelope_phase, log_magnitude)[0, :, 0].numpy()
    true = np.angle(response[: harmonic_bins()])
    np.testing.assert_allclose(np.angle(np.exp(1j * (theta - true))), 0.0, atol=0.05)


def test_only_the_lowest_bins_of_frames_with_a_fundamental_are_replaced() -> None:
    frames, bins = 6, harmonic_bins()
    log_magnitude, phase = torch.randn(1, BINS, frames), torch.rand(1, BINS, frames) * 6.0
    track = torch.tensor([[[0.0, 0.0], [200.0, 1.0], [0.0, 2.0], [333.0, 3.0], [200.0, 4.0], [0.0, 5.0]]])
    out = HarmonicPhase()(log_magnitude, phase, track)
    assert out.shape == phase.shape and out.dtype == torch.float32
    assert out[:, bins:].equal(phase[:, bins:])
    assert out[:, :, [0, 2, 5]].equal(phase[:, :, [0, 2, 5]])  # f0 = 0: the generator's own
    assert not torch.isclose(out[:, :bins, [1, 3, 4]], phase[:, :bins, [1, 3, 4]]).all()
    # the same fundamental at a phase one turn / h apart gives the same phase on harmonic h's bins
    module = HarmonicPhase()
    freq = module.frequency[0, :, 0]
    second = (torch.round(freq / 200.0) == 2).nonzero().flatten()
    shifted = track.clone()
    shifted[0, 1, 1] += math.pi  # half a turn of the fundamental is a whole turn of the second harmonic
    moved = module(log_magnitude, phase, shifted)[0, second, 1] - out[0, second, 1]
    np.testing.assert_allclose(np.cos(moved.numpy()), 1.0, atol=1e-5)
