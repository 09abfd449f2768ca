"""Mel layouts: a checkpoint trained on another mel is refused, and ``tts_triton.training.remel`` carries it over.

The "old" layout here is the LJSpeech one this project used before (80 bins up to 8 kHz); the current
one is :mod:`tts_triton.core.audio`'s. All on tiny seeded models, on the CPU.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY
from scipy.signal import butter, sosfiltfilt

from tts_triton.core import audio
from tts_triton.core.config import LEGACY_MEL_FMAX, ModelConfig
from tts_triton.models.checkpoint import Checkpoint, init_checkpoint, load_checkpoint
from tts_triton.training import remel

#: The layout the networks are carried from: (bins, upper edge in Hz).
OLD = (80, 8000.0)
NEW = (audio.N_MELS, audio.FMAX)

#: What changes shape between layouts (TINY has two postnet layers: convs.0 reads, convs.1 writes).
MEL_KEYS = {
    "acoustic": {
        "decoder.prenet.layers.0.weight", "decoder.projection.weight", "decoder.projection.bias",
        "decoder.postnet.convs.0.0.weight", "decoder.postnet.convs.1.0.weight", "decoder.postnet.convs.1.0.bias",
        "decoder.postnet.convs.1.1.weight", "decoder.postnet.convs.1.1.bias", "decoder.postnet.convs.1.1.running_mean",
        "decoder.postnet.convs.1.1.running_var",
    },
    # weight_g keeps its shape but is recomputed from the resampled weight.
    "generator": {"conv_pre.weight_v", "conv_pre.weight_g"},
}


def in_layout(config: ModelConfig, n_mels: int, fmax: float) -> ModelConfig:
    return dataclasses.replace(config, n_mels=n_mels, mel_fmax=fmax,
                               vocoder=dataclasses.replace(config.vocoder, n_mels=n_mels))


@pytest.fixture(scope="module")
def old() -> Checkpoint:
    ckpt = init_checkpoint(in_layout(TINY, *OLD), seed=3)
    # Non-trivial batch-norm statistics, so that carrying them is visible.
    bn = ckpt.acoustic.decoder.postnet.convs[1][1]
    with torch.no_grad():
        bn.running_mean.copy_(torch.linspace(-1.0, 1.0, OLD[0]))
        bn.running_var.copy_(torch.linspace(0.5, 2.0, OLD[0]))
    return ckpt


@pytest.fixture(scope="module")
def carried(old: Checkpoint) -> Checkpoint:
    return remel.remel(old)


def _states(ckpt: Checkpoint) -> dict[str, dict[str, torch.Tensor]]:
    return {"acoustic": ckpt.acoustic.state_dict(), "generator": ckpt.generator.state_dict()}


# --- refusing another layout ---------------------------------------------------------------------


def test_current_layout_passes() -> None:
    assert (TINY.n_mels, TINY.mel_fmax) == NEW
    TINY.check_mel()


@pytest.mark.parametrize("layout", [OLD, (audio.N_MELS, 8000.0), (80, audio.FMAX)])
def test_check_mel_refuses_another_layout(layout: tuple[int, float]) -> None:
    with pytest.raises(ValueError, match=rf"{layout[0]} mel bins up to {layout[1]:g} Hz.*tts_triton\.training\.remel"):
        in_layout(TINY, *layout).check_mel()


def test_load_checkpoint_refuses_another_layout_unless_any_mel(old: Checkpoint, tmp_path: Path) -> None:
    path = tmp_path / "old.pt"
    old.save(path)
    with pytest.raises(ValueError, match=r"tts_triton\.training\.remel") as refused:
        load_checkpoint(path)
    assert str(path) in str(refused.value)
    loaded = load_checkpoint(path, any_mel=True)
    assert loaded.config == old.config and (loaded.config.n_mels, loaded.config.mel_fmax) == OLD
    for part, state in _states(loaded).items():
        assert all(torch.equal(v, _states(old)[part][k]) for k, v in state.items()), part


def test_config_without_mel_fmax_is_legacy_8khz(old: Checkpoint, tmp_path: Path) -> None:
    """Checkpoints written before ``mel_fmax`` existed were trained on the 0-8 kHz mel."""
    data = TINY.to_dict()
    del data["mel_fmax"]
    assert LEGACY_MEL_FMAX == 8000.0
    assert ModelConfig.from_dict(data).mel_fmax == LEGACY_MEL_FMAX  # even with today's bin count
    with pytest.raises(ValueError, match="remel"):
        ModelConfig.from_dict(data).check_mel()

    path = tmp_path / "legacy.pt"
    old.save(path)
    raw = torch.load(path, weights_only=False)
    del raw["config"]["mel_fmax"]
    torch.save(raw, path)
    with pytest.raises(ValueError, match=r"80 mel bins up to 8000 Hz"):
        load_checkpoint(path)
    assert load_checkpoint(path, any_mel=True).config == old.config


# --- the resampling matrices ---------------------------------------------------------------------


def _centres(layout: tuple[int, float]) -> np.ndarray:
    return audio.mel_points(layout[0], fmax=layout[1])[1:-1]


def test_write_is_exact_for_linear_spectra_and_constant_beyond() -> None:
    write, _ = remel.resampling(OLD, NEW)
    assert write.shape == (NEW[0], OLD[0])
    f_old, f_new = _centres(OLD), _centres(NEW)
    values = 3.0 - 2e-4 * f_old  # linear in frequency
    carried = write @ values
    inside = (f_new >= f_old[0]) & (f_new <= f_old[-1])
    assert inside.sum() > 100  # 128 bins up to 11025 Hz: ~115 of them lie within the old band
    np.testing.assert_allclose(carried[inside], 3.0 - 2e-4 * f_new[inside], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(carried[f_new > f_old[-1]], values[-1])
    np.testing.assert_array_equal(carried[f_new < f_old[0]], values[0])


def test_read_is_the_transposed_back_interpolation() -> None:
    _, read = remel.resampling(OLD, NEW)
    assert read.shape == (NEW[0], OLD[0])
    f_old, f_new = _centres(OLD), _centres(NEW)
    # A new mel interpolated back at the old centres, read with the carried weights, gives exactly what the
    # old weights give on it: sum_k read[k, o] * new[k] == interp(f_old, f_new, new)[o].
    new_mel = np.sin(f_new / 700.0) - 6.0
    np.testing.assert_allclose(read.T @ new_mel, np.interp(f_old, f_new, new_mel), rtol=0, atol=1e-12)
    np.testing.assert_allclose(read.sum(axis=0), 1.0, rtol=0, atol=1e-12)  # each old bin's weight is kept whole
    above = f_new > f_old[-1]
    assert above.sum() > 10 and not read[above][1:].any()  # only the first bin above the old band is read
    assert (np.abs(read[~above]).sum(axis=1) > 0).all()  # every new bin in the old band is read


def test_identical_layouts_are_the_identity(old: Checkpoint) -> None:
    for layout in (OLD, NEW):
        write, read = remel.resampling(layout, layout)
        np.testing.assert_array_equal(write, np.eye(layout[0]))
        np.testing.assert_allclose(read, np.eye(layout[0]), rtol=0, atol=1e-12)
    same = remel.remel(old, *OLD)
    assert same.config == old.config
    for part, state in _states(same).items():
        assert all(torch.equal(v, _states(old)[part][k]) for k, v in state.items()), part


def test_unexplained_shape_change_raises(old: Checkpoint) -> None:
    state = old.acoustic.state_dict()
    shapes = {k: v.shape for k, v in state.items()}
    shapes["text_encoder.embedding.weight"] = torch.Size([7, 7])
    assert "text_encoder.embedding.weight" in state
    with pytest.raises(ValueError, match="cannot carry text_encoder.embedding.weight"):
        remel.carry_state(state, shapes, OLD, NEW)


# --- carrying a checkpoint -----------------------------------------------------------------------


def test_carried_checkpoint_loads_and_keeps_the_rest(old: Checkpoint, carried: Checkpoint, tmp_path: Path) -> None:
    assert carried.config == TINY and carried.trained == old.trained
    change = {"from": {"n_mels": OLD[0], "fmax": OLD[1]}, "to": {"n_mels": NEW[0], "fmax": NEW[1]}}
    assert carried.info["remel"] == [change]
    assert {k: v for k, v in carried.info.items() if k != "remel"} == old.info
    carried.save(tmp_path / "carried.pt")
    loaded = load_checkpoint(tmp_path / "carried.pt")  # the current layout: no any_mel needed
    fresh = _states(init_checkpoint(TINY))
    old_states = _states(old)
    for part, state in _states(loaded).items():
        assert {k: v.shape for k, v in state.items()} == {k: v.shape for k, v in fresh[part].items()}, part
        changed = {k for k, v in old_states[part].items() if not torch.equal(v, state[k])}
        assert changed == MEL_KEYS[part]


def test_write_layers_emit_the_interpolated_mel(old: Checkpoint, carried: Checkpoint) -> None:
    """The frame projection and the postnet's last convolution emit ``write @ `` what they emitted before."""
    write = torch.from_numpy(remel.resampling(OLD, NEW)[0]).float()
    r = TINY.decoder.frames_per_step
    torch.manual_seed(0)
    h = torch.randn(5, carried.acoustic.decoder.projection.in_features)
    x = torch.randn(2, TINY.decoder.postnet_dim, 9)
    with torch.no_grad():
        before = old.acoustic.decoder.projection(h).view(5, r, OLD[0])
        after = carried.acoustic.decoder.projection(h).view(5, r, NEW[0])
        torch.testing.assert_close(after, before @ write.T, rtol=0, atol=1e-5)
        conv_old, conv_new = old.acoustic.decoder.postnet.convs[1][0], carried.acoustic.decoder.postnet.convs[1][0]
        torch.testing.assert_close(conv_new(x).transpose(1, 2), conv_old(x).transpose(1, 2) @ write.T, rtol=0,
                                   atol=1e-5)
        bn = carried.acoustic.decoder.postnet.convs[1][1]
        torch.testing.assert_close(bn.running_mean, torch.linspace(-1.0, 1.0, OLD[0]) @ write.T)


def _effective(conv: torch.nn.Module) -> torch.Tensor:
    """The weight a weight-normed convolution applies: ``g * v / |v|`` over all but dim 0."""
    v, g = conv.weight_v.detach(), conv.weight_g.detach()
    return g * v / v.norm(dim=(1, 2), keepdim=True)


def test_weight_normed_conv_pre_carries_its_effective_weight(old: Checkpoint, carried: Checkpoint) -> None:
    read = torch.from_numpy(remel.resampling(OLD, NEW)[1]).float()
    expected = torch.einsum("no,cok->cnk", read, _effective(old.generator.conv_pre))
    torch.testing.assert_close(_effective(carried.generator.conv_pre), expected, rtol=1e-5, atol=1e-7)
    g = carried.generator.conv_pre.weight_g.detach()
    torch.testing.assert_close(g, carried.generator.conv_pre.weight_v.detach().norm(dim=(1, 2), keepdim=True))
    assert not torch.allclose(g, old.generator.conv_pre.weight_g.detach(), rtol=0.01)  # recomputed, not copied


def _log_mel(samples: np.ndarray, n_mels: int, fmax: float) -> np.ndarray:
    """:func:`audio.mel_spectrogram`'s framing and STFT magnitude, through the filterbank of another layout."""
    pad = audio.FRAME_PAD
    padded = np.pad(np.asarray(samples, np.float32), (pad, pad), mode="reflect")
    n_frames = 1 + (padded.shape[0] - audio.N_FFT) // audio.HOP_LENGTH
    frames = np.lib.stride_tricks.sliding_window_view(padded, audio.N_FFT)[:: audio.HOP_LENGTH][:n_frames]
    spec = np.fft.rfft(frames * audio.hann_window(), axis=-1)
    magnitude = np.sqrt(spec.real.astype(np.float32) ** 2 + spec.imag.astype(np.float32) ** 2 + audio.MAGNITUDE_EPS)
    mel = magnitude @ audio.mel_filterbank(n_mels=n_mels, fmax=fmax).T
    return np.log(np.maximum(mel, audio.LOG_CLAMP)).astype(np.float32)


def _harmonic() -> np.ndarray:
    """1 s of a buzzy vowel: harmonics of a 140 Hz +-10% glide below 4 kHz, plus noise low-passed at 7 kHz."""
    sr = audio.SAMPLE_RATE
    t = np.arange(sr) / sr
    phase = 2 * np.pi * np.cumsum(140.0 * (1 + 0.1 * np.sin(2 * np.pi * 2 * t))) / sr
    x = sum(np.sin(k * phase) / k for k in range(1, 25))
    x *= 0.5 + 0.5 * np.sin(2 * np.pi * 1.5 * t) ** 2
    noise = sosfiltfilt(butter(8, 7000, fs=sr, output="sos"), np.random.default_rng(0).standard_normal(sr))
    x = x + 0.3 * noise
    return (0.4 * x / np.abs(x).max()).astype(np.float32)


def _espeak() -> np.ndarray:
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    from tts_triton.data.prosody import EMOTIONS, VOICES, render

    return render("The quick brown fox jumps over the lazy dog.", VOICES["m1"], EMOTIONS["neutral"])


def _mel_readers(ckpt: Checkpoint, mel: np.ndarray) -> dict[str, torch.Tensor]:
    """Pre-activation outputs ``[frames, channels]`` of the three layers that read mel bins."""
    m = torch.from_numpy(mel)[None]
    with torch.no_grad():
        return {
            "prenet": ckpt.acoustic.decoder.prenet.layers[0](m)[0],
            "postnet": ckpt.acoustic.decoder.postnet.convs[0][0](m.transpose(1, 2))[0].T,
            "conv_pre": ckpt.generator.conv_pre(m.transpose(1, 2))[0].T,
        }


#: Largest relative error ``|carried - old| / |old|`` of the three read layers, per signal. Measured
#: with seeds 3, 4 and 5 of the tiny model: harmonic 0.044-0.063, espeak-ng 0.013-0.018 (what is left is
#: the old mel not being exactly the new one interpolated back). Fresh (not carried) weights: 1.23-2.18.
READ_BOUND = {"harmonic": 0.1, "espeak": 0.04}


@pytest.mark.parametrize("signal", ["harmonic", "espeak"])
def test_carried_readers_compute_about_the_same(signal: str, old: Checkpoint, carried: Checkpoint) -> None:
    samples = _harmonic() if signal == "harmonic" else _espeak()
    new_mel = _log_mel(samples, *NEW)
    np.testing.assert_allclose(new_mel, audio.mel_spectrogram(samples), rtol=0, atol=1e-4)  # the helper is right
    old_mel = _log_mel(samples, *OLD)
    before, after = _mel_readers(old, old_mel), _mel_readers(carried, new_mel)
    fresh = _mel_readers(init_checkpoint(TINY, seed=4), new_mel)
    for layer, y in before.items():
        error = float((after[layer] - y).norm() / y.norm())
        unrelated = float((fresh[layer] - y).norm() / y.norm())
        assert error < READ_BOUND[signal], (layer, error)
        assert unrelated > 1.0 and unrelated > 4 * READ_BOUND[signal], (layer, unrelated)


def test_command_line(old: Checkpoint, tmp_path: Path) -> None:
    old.save(tmp_path / "old.pt")
    argv = ["--checkpoint", str(tmp_path / "old.pt"), "--out", str(tmp_path / "new.pt"), "--half"]
    assert remel.main(argv) == 0
    new = load_checkpoint(tmp_path / "new.pt")
    assert (new.config.n_mels, new.config.mel_fmax) == NEW and new.info["remel"][0]["from"]["n_mels"] == OLD[0]
    assert new.info["commands"][-1].startswith(f"python -m {remel.MODULE} --checkpoint ")
    assert new.acoustic.decoder.prenet.layers[0].weight.shape == (TINY.decoder.prenet_dims[0], NEW[0])
