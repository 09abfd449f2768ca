"""Style encoder: Global Style Tokens (Wang et al., 2018).

A reference encoder (a stack of stride-2 conv2d layers over the mel, then a GRU) summarises a
reference utterance into one vector; multi-head attention of that vector over a bank of learned
style tokens gives the style embedding that conditions the decoder.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tts_triton.core.config import StyleEncoderConfig


class ReferenceEncoder(nn.Module):
    """``mel [B, frames, n_mels]`` -> ``[B, gru_dim]`` (the GRU's final state)."""

    def __init__(self, cfg: StyleEncoderConfig, n_mels: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 1
        for ch in cfg.conv_channels:
            layers += [nn.Conv2d(in_ch, ch, 3, stride=2, padding=1), nn.BatchNorm2d(ch), nn.ReLU()]
            in_ch = ch
        self.convs = nn.Sequential(*layers)
        mel_bins = n_mels
        for _ in cfg.conv_channels:
            mel_bins = (mel_bins - 1) // 2 + 1
        self.gru = nn.GRU(in_ch * mel_bins, cfg.gru_dim, batch_first=True)

    def forward(self, mel: Tensor) -> Tensor:
        x = self.convs(mel.unsqueeze(1))  # [B, C, frames', mels']
        x = x.permute(0, 2, 1, 3).flatten(2)  # [B, frames', C * mels']
        _, h = self.gru(x, x.new_zeros(1, x.shape[0], self.gru.hidden_size))
        return h[0]


class StyleTokenLayer(nn.Module):
    """Multi-head attention of a reference embedding over learned tokens -> ``[B, dim]``."""

    def __init__(self, cfg: StyleEncoderConfig) -> None:
        super().__init__()
        if cfg.dim % cfg.heads:
            raise ValueError(f"style dim {cfg.dim} is not divisible by heads {cfg.heads}")
        self.heads = cfg.heads
        self.tokens = nn.Parameter(torch.randn(cfg.tokens, cfg.dim // cfg.heads) * 0.5)
        self.query = nn.Linear(cfg.gru_dim, cfg.dim, bias=False)
        self.key = nn.Linear(cfg.dim // cfg.heads, cfg.dim, bias=False)
        self.value = nn.Linear(cfg.dim // cfg.heads, cfg.dim, bias=False)

    def forward(self, reference: Tensor) -> Tensor:
        b = reference.shape[0]
        n, d = self.tokens.shape[0], self.query.out_features
        keys = torch.tanh(self.tokens)
        q = self.query(reference).view(b, self.heads, 1, d // self.heads)
        k = self.key(keys).view(n, self.heads, d // self.heads).transpose(0, 1)  # [H, N, d/H]
        v = self.value(keys).view(n, self.heads, d // self.heads).transpose(0, 1)
        weights = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / (d // self.heads) ** 0.5, dim=-1)
        return torch.matmul(weights, v).reshape(b, d)  # [B, H, 1, d/H] -> [B, d]


class StyleEncoder(nn.Module):
    """``ref_mel [B, frames, n_mels]`` -> style vector ``[B, dim]``."""

    def __init__(self, cfg: StyleEncoderConfig, n_mels: int) -> None:
        super().__init__()
        self.reference = ReferenceEncoder(cfg, n_mels)
        self.tokens = StyleTokenLayer(cfg)

    def forward(self, ref_mel: Tensor) -> Tensor:
        return self.tokens(self.reference(ref_mel))
