"""HiFi-GAN generator layout, shapes, weight norm, checkpoint loading; discriminators and losses."""

from __future__ import annotations

import io
import warnings

import pytest
import torch

from tts_triton.core import audio
from tts_triton.core.config import VocoderConfig
from tts_triton.models.hifigan import Generator, load_generator_state
from tts_triton.training.hifigan_losses import (
    STFT_RESOLUTIONS,
    MultiPeriodDiscriminator,
    MultiResolutionDiscriminator,
    MultiScaleDiscriminator,
    discriminator_loss,
    feature_loss,
    generator_loss,
    mel_loss,
    phase_loss,
    stft_loss,
)


def _wn(name: str, out_dim: int, weight_shape: tuple[int, ...], bias: int) -> dict[str, tuple[int, ...]]:
    """Weight-normed layer: ``weight_g`` keeps dim 0 of the weight, ``weight_v`` is the full weight."""
    return {
        f"{name}.weight_g": (out_dim, 1, 1),
        f"{name}.weight_v": weight_shape,
        f"{name}.bias": (bias,),
    }


def _v1_public_layout() -> dict[str, tuple[int, ...]]:
    """The public v1 generator's state_dict, written out from the paper's v1 hyperparameters.

    v1: 80 mels, initial channels 512, upsample rates (8, 8, 2, 2) with kernels (16, 16, 4, 4),
    ResBlock1 with kernels (3, 7, 11), each with dilations (1, 3, 5). The public LJSpeech checkpoints
    read the 80-bin 0-8 kHz mel; this project's mel is wider (see :mod:`tts_triton.core.audio`), which only
    changes ``conv_pre``'s input channels.
    """
    table = _wn("conv_pre", 512, (512, 80, 7), 512)
    # ConvTranspose1d weights are [in, out, kernel]; weight norm over dim 0 gives g of shape [in, 1, 1].
    table |= _wn("ups.0", 512, (512, 256, 16), 256)
    table |= _wn("ups.1", 256, (256, 128, 16), 128)
    table |= _wn("ups.2", 128, (128, 64, 4), 64)
    table |= _wn("ups.3", 64, (64, 32, 4), 32)
    block = 0
    for channels in (256, 128, 64, 32):
        for kernel in (3, 7, 11):
            for group in ("convs1", "convs2"):
                for m in range(3):
                    table |= _wn(f"resblocks.{block}.{group}.{m}", channels, (channels, channels, kernel), channels)
            block += 1
    table |= _wn("conv_post", 1, (1, 32, 7), 1)
    return table


#: The mel width of the public HiFi-GAN checkpoints (LJSpeech, 80 bins up to 8 kHz).
PUBLIC_N_MELS = 80


@pytest.fixture(scope="module")
def v1() -> Generator:
    """A v1 generator in the public layout (80 mel bins), so that public checkpoints load into it."""
    torch.manual_seed(0)
    return Generator(VocoderConfig("v1", n_mels=PUBLIC_N_MELS)).eval()


def test_v1_state_dict_matches_public_layout(v1: Generator) -> None:
    expected = _v1_public_layout()
    assert len(expected) == 3 * (1 + 4 + 12 * 6 + 1)
    actual = {k: tuple(v.shape) for k, v in v1.state_dict().items()}
    assert set(actual) == set(expected)
    assert actual == expected


def test_v1_parameter_count(v1: Generator) -> None:
    n_params = sum(p.numel() for p in v1.parameters())
    assert abs(n_params - 13.93e6) < 0.01e6  # public figure for v1 (80 mel bins): 13,936,130 here
    # This project's mel has audio.N_MELS bins: only conv_pre's weight grows, by 512 channels x 7 taps
    # per extra bin (weight_g and the bias are per output channel): 13,936,130 + 172,032 at 128 bins.
    ours = sum(p.numel() for p in Generator(VocoderConfig("v1")).parameters())
    assert ours - n_params == 512 * 7 * (audio.N_MELS - PUBLIC_N_MELS)


def test_n_mels_comes_from_config() -> None:
    gen = Generator(VocoderConfig("v2", n_mels=64))
    assert gen.conv_pre.weight_v.shape == (128, 64, 7)


def test_construction_emits_no_warnings() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Generator(VocoderConfig("v3")).remove_weight_norm()
    assert [str(w.message) for w in caught] == []


def test_public_checkpoint_dict_loads_strict(v1: Generator) -> None:
    buffer = io.BytesIO()
    torch.save({"generator": v1.state_dict()}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, map_location="cpu", weights_only=True)
    fresh = Generator(VocoderConfig("v1", n_mels=PUBLIC_N_MELS))
    load_generator_state(fresh, checkpoint)
    loaded, saved = fresh.state_dict(), v1.state_dict()
    assert loaded.keys() == saved.keys() and len(saved) > 0
    assert [name for name, tensor in saved.items() if not torch.equal(loaded[name], tensor)] == []


def test_bare_state_dict_loads_and_mismatch_raises() -> None:
    src, dst = Generator(VocoderConfig("v3")), Generator(VocoderConfig("v3"))
    load_generator_state(dst, src.state_dict())
    assert torch.equal(dst.conv_post.weight_v, src.conv_post.weight_v)
    with pytest.raises(RuntimeError):
        load_generator_state(Generator(VocoderConfig("v2")), src.state_dict())


@pytest.mark.parametrize("variant", ["v1", "v2", "v3"])
def test_output_length_and_range(variant: str, v1: Generator) -> None:
    torch.manual_seed(0)
    gen = v1 if variant == "v1" else Generator(VocoderConfig(variant)).eval()
    assert gen.cfg.hop_length == 256
    for frames in (1, 2, 5):
        with torch.no_grad():
            out = gen(torch.randn(1, gen.cfg.n_mels, frames) * 3)
        assert out.shape == (1, 1, frames * 256)
        assert out.abs().max() <= 1.0
        assert torch.isfinite(out).all()


def test_remove_weight_norm_keeps_outputs() -> None:
    torch.manual_seed(0)
    gen = Generator(VocoderConfig("v2")).eval()
    mel = torch.randn(1, gen.cfg.n_mels, 6)
    with torch.no_grad():
        before = gen(mel)
        gen.remove_weight_norm()
        after = gen(mel)
    names = list(gen.state_dict())
    assert not any(n.endswith(("weight_g", "weight_v")) for n in names)
    assert "resblocks.0.convs1.0.weight" in names and "ups.0.weight" in names
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-6)


def test_default_discriminators() -> None:
    torch.manual_seed(0)
    mpd, msd = MultiPeriodDiscriminator(), MultiScaleDiscriminator()
    assert [d.period for d in mpd.discriminators] == [2, 3, 5, 7, 11]
    assert len(msd.discriminators) == 3
    assert hasattr(msd.discriminators[0].convs[0], "weight_orig")  # spectral norm on the raw-audio scale
    assert all(hasattr(d.convs[0], "weight_g") for d in msd.discriminators[1:])
    mrd = MultiResolutionDiscriminator()
    assert [d.n_fft for d in mrd.discriminators] == [n for n, _, _ in STFT_RESOLUTIONS]
    real, fake = torch.rand(2, 1, 2099) - 0.5, torch.rand(2, 1, 2099) - 0.5  # a prime: no multiple of any period
    with torch.no_grad():
        for d, n_fmaps in ((mpd, 6), (msd, 8), (mrd, 6)):
            real_scores, fake_scores, real_fmaps, fake_fmaps = d(real, fake)
            n_sub = len(d.discriminators)
            assert len(real_scores) == len(fake_scores) == len(real_fmaps) == len(fake_fmaps) == n_sub
            assert all(s.ndim == 2 and s.shape[0] == 2 for s in real_scores + fake_scores)
            assert all(len(maps) == n_fmaps for maps in real_fmaps + fake_fmaps)
            assert not torch.equal(real_scores[0], fake_scores[0])



def test_narrowed_discriminators_keep_their_layers_with_fewer_channels() -> None:
    def size(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    for make in (MultiPeriodDiscriminator, MultiScaleDiscriminator, MultiResolutionDiscriminator):
        wide, narrow = make(), make(narrow=16)
        assert [len(d.convs) for d in narrow.discriminators] == [len(d.convs) for d in wide.discriminators]
        assert size(narrow) < size(wide) / 16  # channels / 16 (the MSD's groups too)
        real_scores, *_ = narrow(torch.rand(1, 1, 2099), torch.rand(1, 1, 2099))
        assert [s.shape[1] for s in real_scores] == [s.shape[1] for s in wide(torch.rand(1, 1, 2099),
                                                                               torch.rand(1, 1, 2099))[0]]

def test_losses_backprop() -> None:
    """Adversarial, feature-matching and mel losses are finite scalars whose gradients reach G and D.

    Fewer sub-discriminators than the defaults keep this fast; every code path is still exercised.
    """
    torch.manual_seed(0)
    gen = Generator(VocoderConfig("v3"))
    discriminators = (MultiPeriodDiscriminator(periods=(2, 3)), MultiScaleDiscriminator(scales=2),
                      MultiResolutionDiscriminator(STFT_RESOLUTIONS[::2]))
    real = 0.5 * torch.rand(2, 1, 4 * 256) - 0.25
    fake = gen(torch.randn(2, gen.cfg.n_mels, 4))

    # One discriminator pass serves both objectives; autograd.grad keeps each backward to what it needs.
    d_terms, g_terms = [], [mel_loss(real, fake)]
    for d in discriminators:
        real_scores, fake_scores, real_fmaps, fake_fmaps = d(real, fake)
        d_terms.append(discriminator_loss(real_scores, fake_scores))
        g_terms += [generator_loss(fake_scores), feature_loss(real_fmaps, fake_fmaps)]
    for term in d_terms + g_terms:
        assert term.ndim == 0 and torch.isfinite(term) and term.requires_grad

    d_params = [p for d in discriminators for p in d.parameters()]
    d_grads = torch.autograd.grad(sum(d_terms), d_params, retain_graph=True)
    assert all(torch.isfinite(g).all() for g in d_grads) and all(g.abs().sum() > 0 for g in d_grads)
    g_grads = torch.autograd.grad(sum(g_terms), list(gen.parameters()))
    assert all(torch.isfinite(g).all() for g in g_grads) and all(g.abs().sum() > 0 for g in g_grads)


def test_stft_loss_sees_what_the_mel_blurs() -> None:
    """Zero for identical audio, differentiable, and it tells a harmonic tone from the same partials
    detuned within a mel bin far more strongly than the mel loss does (the reason it exists)."""
    t = torch.arange(8192) / audio.SAMPLE_RATE
    tone = sum(torch.sin(2 * torch.pi * 110.0 * k * t) / k for k in range(20, 40))[None, None] * 0.05
    detuned = sum(torch.sin(2 * torch.pi * (110.0 * k + 23.0) * t) / k for k in range(20, 40))[None, None] * 0.05
    assert float(stft_loss(tone, tone)) == 0.0
    fake = detuned.clone().requires_grad_(True)
    loss = stft_loss(tone, fake)
    (grad,) = torch.autograd.grad(loss, fake)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    # Relative to how much each loss says about broadband noise of the same level (measured: 0.068 vs 0.0095):
    noise = 0.05 * torch.randn(tone.shape, generator=torch.Generator().manual_seed(0))
    stft_ratio = float(stft_loss(tone, detuned)) / float(stft_loss(tone, noise))
    mel_ratio = float(mel_loss(tone, detuned)) / float(mel_loss(tone, noise))
    assert stft_ratio > 2 * mel_ratio, (stft_ratio, mel_ratio)


def _tones(samples: int = 8192, delay: int = 0, sign: float = 1.0) -> torch.Tensor:
    """A 120 Hz voice-like harmonic series ``[1, 1, samples]``, delayed by ``delay`` samples, times ``sign``."""
    t = (torch.arange(samples) - delay).float() / audio.SAMPLE_RATE
    wave = sum(torch.sin(2 * torch.pi * 120 * k * t + k) / k for k in range(1, 20))
    return sign * 0.1 * wave[None, None]


def test_phase_loss_sees_the_phase_structure_not_the_absolute_phase() -> None:
    real = _tones()
    assert phase_loss(real, real).item() == pytest.approx(0.0, abs=1e-3)  # PHASE_EPS in the quietest bins
    assert phase_loss(real, 3 * real).item() == pytest.approx(0.0, abs=1e-3)  # magnitudes are not its business
    assert phase_loss(real, _tones(sign=-1.0)).item() == pytest.approx(0.0, abs=1e-3)  # half a turn everywhere
    late = phase_loss(real, _tones(delay=40)).item()  # a delay turns each bin by its own angle: group delay moves
    assert late > 0.05
    assert phase_loss(real, 0.1 * torch.randn_like(real)).item() > 10 * late


def test_phase_loss_gradients_are_finite_on_silence() -> None:
    real = torch.cat([_tones(4096), torch.zeros(1, 1, 4096)], dim=-1)
    fake = torch.zeros_like(real, requires_grad=True)
    phase_loss(real, fake * 1.0).backward()
    assert torch.isfinite(fake.grad).all()

