"""HiFi-GAN generator (Kong et al., 2020): mel spectrogram -> waveform.

The generator upsamples a log-mel ``[B, n_mels, frames]`` with transposed convolutions; after each
upsampling a multi-receptive-field fusion (MRF) averages ``len(resblock_kernel_sizes)`` residual
blocks of different kernel sizes and dilations. Every convolution carries weight normalisation
while training; :meth:`Generator.remove_weight_norm` folds it away for inference and export.

Parameter names follow the public HiFi-GAN generator layout (``conv_pre``, ``ups.N``,
``resblocks.N.convs1.M`` / ``convs2.M`` / ``convs.M``, ``conv_post``, weight norm as
``weight_g``/``weight_v``), so a published generator checkpoint loads with ``strict=True``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tts_triton.core.config import VocoderConfig

#: Negative slope of the LeakyReLUs inside the network (and the discriminators).
LRELU_SLOPE = 0.1
#: The activation before ``conv_post`` uses PyTorch's default slope in the published generators;
#: keeping it makes public checkpoints reproduce their audio.
POST_LRELU_SLOPE = 0.01
INIT_STD = 0.01

_M = TypeVar("_M", bound=nn.Module)


def weight_norm(module: _M) -> _M:
    """Classic ``torch.nn.utils.weight_norm`` (parameters ``weight_g``/``weight_v``), without its deprecation warning.

    The parametrization-based replacement names its parameters ``parametrizations.weight.original0/1``,
    which published HiFi-GAN checkpoints do not use.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*weight_norm.*deprecated", category=FutureWarning)
        return nn.utils.weight_norm(module)


def same_padding(kernel_size: int, dilation: int = 1) -> int:
    """Padding that keeps the length of a stride-1 convolution with an odd ``kernel_size``."""
    return dilation * (kernel_size - 1) // 2


def _init_conv(conv: _M) -> _M:
    """Draw the weight from N(0, INIT_STD); applied before weight norm so that ``weight_v`` starts there."""
    nn.init.normal_(conv.weight, 0.0, INIT_STD)
    return conv


def _dilated_conv(channels: int, kernel_size: int, dilation: int) -> nn.Conv1d:
    conv = nn.Conv1d(channels, channels, kernel_size, dilation=dilation, padding=same_padding(kernel_size, dilation))
    return weight_norm(_init_conv(conv))


class ResBlock1(nn.Module):
    """Paper's ResBlock type 1: per dilation ``d``, ``x + conv_1(lrelu(conv_d(lrelu(x))))``."""

    def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(_dilated_conv(channels, kernel_size, d) for d in dilations)
        self.convs2 = nn.ModuleList(_dilated_conv(channels, kernel_size, 1) for _ in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for dilated, plain in zip(self.convs1, self.convs2, strict=True):
            x = x + plain(F.leaky_relu(dilated(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
        return x


class ResBlock2(nn.Module):
    """Paper's ResBlock type 2 (used by v3): per dilation ``d``, ``x + conv_d(lrelu(x))``."""

    def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(_dilated_conv(channels, kernel_size, d) for d in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, LRELU_SLOPE))
        return x


class Generator(nn.Module):
    """HiFi-GAN generator ``cfg.variant``: ``[B, cfg.n_mels, frames] -> [B, 1, frames * cfg.hop_length]`` in [-1, 1]."""

    def __init__(self, cfg: VocoderConfig) -> None:
        super().__init__()
        p = cfg.params
        rates, up_kernels = p["upsample_rates"], p["upsample_kernel_sizes"]
        kernels, dilations = p["resblock_kernel_sizes"], p["resblock_dilation_sizes"]
        block = {"1": ResBlock1, "2": ResBlock2}[p["resblock"]]
        channels = p["upsample_initial_channel"]
        self.cfg = cfg
        self.mrf_size = len(kernels)

        self.conv_pre = weight_norm(nn.Conv1d(cfg.n_mels, channels, 7, padding=3))
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for rate, kernel in zip(rates, up_kernels, strict=True):
            # (kernel - rate) is even in every variant, so each stage multiplies the length by exactly `rate`.
            up = nn.ConvTranspose1d(channels, channels // 2, kernel, rate, padding=(kernel - rate) // 2)
            self.ups.append(weight_norm(_init_conv(up)))
            channels //= 2
            self.resblocks.extend(block(channels, k, d) for k, d in zip(kernels, dilations, strict=True))
        self.conv_post = weight_norm(nn.Conv1d(channels, 1, 7, padding=3))

    def forward(self, mel: Tensor) -> Tensor:
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            blocks = self.resblocks[i * self.mrf_size : (i + 1) * self.mrf_size]
            fused = blocks[0](x)
            for block in blocks[1:]:
                fused = fused + block(x)
            x = fused / self.mrf_size
        return torch.tanh(self.conv_post(F.leaky_relu(x, POST_LRELU_SLOPE)))

    def remove_weight_norm(self) -> None:
        """Fold ``weight_g``/``weight_v`` into plain ``weight`` in every submodule (outputs are unchanged)."""
        for module in self.modules():
            if hasattr(module, "weight_g"):
                nn.utils.remove_weight_norm(module)


def load_generator_state(gen: nn.Module, state: Mapping[str, Any]) -> None:
    """Load ``state`` into ``gen`` with ``strict=True``.

    ``state`` is a bare generator state_dict or a public checkpoint ``{"generator": state_dict, ...}``.
    Both sides must agree on weight norm: load into a fresh generator, then call ``remove_weight_norm``.
    """
    if "generator" in state:
        state = state["generator"]
    gen.load_state_dict(state, strict=True)
