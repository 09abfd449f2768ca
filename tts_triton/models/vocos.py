"""A vocoder that predicts the STFT at the frame rate and inverts it (Vocos: Siuzdak, 2023).

HiFi-GAN builds the waveform by upsampling through convolutions at up to the sample rate, where its channels are
few and its kernels small: most of its GPU time goes to memory traffic, not arithmetic. This generator never
leaves the mel's frame rate: a ConvNeXt stack (depthwise convolution, LayerNorm, a GELU MLP, a learned
per-channel scale on each residual branch) turns the log-mel into each frame's log-magnitude and phase, and
:class:`~tts_triton.models.stft.FrameIstft` overlap-adds them into audio, in the frames of
:mod:`tts_triton.core.audio`. Its matrix products are large and few, so it runs near the GPU's arithmetic rate.

Streaming: output sample ``s`` depends on the mel frames within ``receptive_field`` of its own frame (the
convolutions' reach plus the two hops of the inverse STFT); the variants are sized so that this fits the served
vocoder context (:class:`~tts_triton.core.config.StreamingConfig`), which makes a streamed window's audio equal to
one-shot vocoding of the whole mel.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from tts_triton.core.config import VocoderConfig
from tts_triton.models.harmonic import HarmonicPhase
from tts_triton.models.stft import BINS, FrameIstft

#: Largest log-magnitude the head may give a bin: e^4.6 ~ 100, far above any bin of audio in [-1, 1]
#: (a full-scale sine's peak bin is ~256), and safe from overflow in bf16 and fp16.
MAX_LOG_MAGNITUDE = math.log(100.0)


class ConvNeXtBlock(nn.Module):
    """``x + scale * mlp(norm(depthwise(x)))`` on ``[B, dim, frames]``."""

    def __init__(self, dim: int, intermediate: int, kernel: int, scale: float) -> None:
        super().__init__()
        self.depthwise = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, intermediate)
        self.down = nn.Linear(intermediate, dim)
        self.scale = nn.Parameter(torch.full((dim,), scale))

    def forward(self, x: Tensor) -> Tensor:
        y = self.norm(self.depthwise(x).transpose(1, 2))
        y = self.down(nn.functional.gelu(self.up(y)))
        return x + (self.scale * y).transpose(1, 2)


class VocosGenerator(nn.Module):
    """``[B, cfg.n_mels, frames] -> [B, 1, frames * HOP_LENGTH]``; in eval mode clipped to [-1, 1]. Given the mel's
    fundamental track ``[B, frames, 2]`` (:mod:`tts_triton.core.fundamental`) and built with ``cfg.harmonic``, the
    lowest bins' phase comes from :class:`~tts_triton.models.harmonic.HarmonicPhase`."""

    def __init__(self, cfg: VocoderConfig) -> None:
        super().__init__()
        p = cfg.params
        dim, kernel = p["dim"], p["kernel"]
        self.embed = nn.Conv1d(cfg.n_mels, dim, kernel, padding=kernel // 2)
        self.norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList(ConvNeXtBlock(dim, p["intermediate"], kernel, 1.0 / p["layers"])
                                    for _ in range(p["layers"]))
        self.final_norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 2 * BINS)  # each bin's log-magnitude, then its phase
        self.istft = FrameIstft()
        self.harmonic = HarmonicPhase() if cfg.harmonic else None
        for module in self.modules():
            if isinstance(module, nn.Conv1d | nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)

    @staticmethod
    def receptive_field(cfg: VocoderConfig) -> int:
        """Frames each side of a sample's own frame that its value depends on."""
        return (cfg.params["layers"] + 1) * (cfg.params["kernel"] // 2) + 2

    def forward(self, mel: Tensor, fundamental: Tensor | None = None) -> Tensor:
        x = self.norm(self.embed(mel).transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = self.final_norm(x.transpose(1, 2))
        # the head in fp32 whatever the stage's precision: a phase of several radians keeps ~0.06 rad in bf16
        with torch.autocast(x.device.type, enabled=False):
            out = nn.functional.linear(x.float(), self.head.weight.float(), self.head.bias.float()).transpose(1, 2)
        log_magnitude, phase = out[:, :BINS], out[:, BINS:]
        log_magnitude = torch.clamp(log_magnitude, max=MAX_LOG_MAGNITUDE)
        if fundamental is not None and self.harmonic is not None:
            phase = self.harmonic(log_magnitude, phase, fundamental)
        magnitude = torch.exp(log_magnitude)
        samples = self.istft(magnitude * torch.cos(phase), magnitude * torch.sin(phase))
        if not self.training:
            samples = torch.clamp(samples, -1.0, 1.0)
        return samples.unsqueeze(1)
