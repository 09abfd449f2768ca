"""The mel's fundamental (tts_triton.core.fundamental) and the harmonic phase the vocoder draws from it
(tts_triton.models.harmonic): the estimate on tones of known pitch, the track grown in pieces against the whole,
the envelope's phase against a filter that is minimum-phase by construction, what the phase model replaces, and
the estimate made once per merged decoder request (tts_triton.serving.fundamentals)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
import torch

from tts_triton.core import audio, contract, fundamental
from tts_triton.core.config import ModelConfig, VocoderConfig
from tts_triton.models.harmonic import HarmonicPhase, harmonic_bins
from tts_triton.models.stft import BINS
from tts_triton.serving.coalesce import Coalescer
from tts_triton.serving.controls import AS_TRAINED, Controls
from tts_triton.serving.fundamentals import FundamentalBackend
from tts_triton.serving.pipeline import Pipeline


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


#: A model whose vocoder takes the fundamental track.
HARMONIC = ModelConfig(vocoder=VocoderConfig(variant="vocos"))


class ToneDecoder:
    """A backend whose decoder emits a sung tone's log-mel frames in order, each row from where its own state says
    it is (carried in the attention state), stopping at the tone's end; its vocoder returns the fundamental track
    it is given, sample by sample, so the audio shows what the vocoder was fed."""

    def __init__(self, cfg: ModelConfig) -> None:
        t = np.arange(audio.SAMPLE_RATE) / audio.SAMPLE_RATE
        self.cfg, self.mel = cfg, audio.mel_spectrogram(tone(210.0 + 40.0 * np.sin(2 * np.pi * 1.3 * t)))

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        await asyncio.sleep(0)
        d, rows = self.cfg.decoder, len(next(iter(inputs.values())))
        if model == contract.TEXT_ENCODER:
            t = inputs[contract.PHONEMES].shape[1]
            return {contract.MEMORY: np.zeros((rows, t, sum(contract.memory_parts(self.cfg))), np.float32)}
        if model == contract.VOCODER:
            track = inputs[contract.FUNDAMENTAL]
            return {contract.NET_AUDIO: np.repeat(track, audio.HOP_LENGTH // 2, axis=1).reshape(rows, -1)}
        attention = inputs[contract.ATTENTION].copy()
        steps = attention[:, 0, :1].astype(int) + np.arange(d.steps_per_call)  # [rows, K]
        attention[:, 0, 0] += d.steps_per_call
        frames = (steps[:, :, None] * d.frames_per_step + np.arange(d.frames_per_step)).reshape(rows, -1)
        last = len(self.mel) // d.frames_per_step - 1
        return {contract.NET_MEL: self.mel[frames % len(self.mel)], contract.GATE: np.where(steps == last, 1.0, -1.0),
                contract.STATE + contract.STATE_OUT_SUFFIX: inputs[contract.STATE],
                contract.ATTENTION + contract.STATE_OUT_SUFFIX: attention}


@pytest.mark.parametrize("controls", [AS_TRAINED, Controls(speed=1.25), Controls(pitch=2.0)])
def test_the_backends_estimate_feeds_the_vocoder_what_each_stream_would(controls: Controls) -> None:
    """Streams fed the fundamental their merged decoder request was given (FundamentalBackend under the Coalescer)
    vocode what each estimating its own frames vocodes; with speed or the mel warp, each estimates its own."""
    cfg = HARMONIC
    style = np.zeros(cfg.style.dim, np.float32)

    async def two_streams(backend: object) -> list[np.ndarray]:
        pipelines = [Pipeline(backend, cfg) for _ in range(2)]
        runs = [p.synthesize([[1] * 60], style, controls=controls) for p in pipelines]
        return [wav for wav, _ in await asyncio.gather(*runs)]

    own = asyncio.run(two_streams(ToneDecoder(cfg)))
    specs = contract.network_specs(cfg)
    estimating = FundamentalBackend(ToneDecoder(cfg))
    merged = asyncio.run(two_streams(Coalescer(estimating, specs, dict.fromkeys(specs, 8), streams=lambda: 2)))
    assert own[0].any() and own[0].size > audio.SAMPLE_RATE // 2
    for a, b in zip(own, merged, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def test_the_backend_adds_each_frames_estimate_to_decoder_calls_only() -> None:
    cfg = HARMONIC
    backend = FundamentalBackend(ToneDecoder(cfg))
    rows = 3
    state = {s.name: np.zeros((rows, *(5 if d == contract.TOKENS else d for d in s.dims)), np.float32)
             for s in contract.decoder_states(cfg)}
    out = asyncio.run(backend.infer(contract.DECODER, state))
    mel = out[contract.NET_MEL]
    assert out[fundamental.DECODED_F0].shape == mel.shape[:2]
    np.testing.assert_allclose(out[fundamental.DECODED_F0][1], fundamental.estimate(mel[1]), rtol=1e-6)
    encoded = asyncio.run(backend.infer(contract.TEXT_ENCODER, {contract.PHONEMES: np.zeros((1, 8), np.int32)}))
    assert fundamental.DECODED_F0 not in encoded
