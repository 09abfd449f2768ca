"""Text encoder: phoneme embedding + Transformer encoder with convolutional feed-forward blocks.

The feed-forward blocks are 1-D convolutions (as in FastSpeech), which suits phoneme sequences.
Every block re-applies the padding mask, so the output at a valid position does not depend on how
much padding follows: the server pads to length buckets and must get the same memory.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tts_triton.core.config import TextEncoderConfig
from tts_triton.models.layers import masked_logits

MAX_POSITIONS = 1024


def sinusoid_table(length: int, dim: int) -> Tensor:
    """Sinusoidal position encodings ``[length, dim]`` (Vaswani et al., 2017)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention over valid positions only."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        weights = self.dropout(torch.softmax(masked_logits(logits, mask[:, None, None, :]), dim=-1))
        return self.out(torch.matmul(weights, v).transpose(1, 2).reshape(b, t, d))


class ConvFeedForward(nn.Module):
    """Conv1d(kernel) -> ReLU -> Conv1d(1), position-wise over ``[B, T, D]``."""

    def __init__(self, dim: int, hidden: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(dim, hidden, kernel, padding=kernel // 2)
        self.conv2 = nn.Conv1d(hidden, dim, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = F.relu(self.conv1((x * mask.unsqueeze(-1)).transpose(1, 2)))
        return self.conv2(self.dropout(h)).transpose(1, 2)


class EncoderBlock(nn.Module):
    """Post-norm Transformer block: self-attention and conv feed-forward, each residual + LayerNorm."""

    def __init__(self, cfg: TextEncoderConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(cfg.dim, cfg.heads, cfg.dropout)
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.ffn = ConvFeedForward(cfg.dim, cfg.ffn_dim, cfg.ffn_kernel, cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, mask)))
        x = self.norm2(x + self.dropout(self.ffn(x, mask)))
        return x * mask.unsqueeze(-1)


class TextEncoder(nn.Module):
    """``phonemes [B, T]`` (int), ``mask [B, T]`` (float, 1 = valid) -> memory ``[B, T, dim]``."""

    def __init__(self, cfg: TextEncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.n_symbols, cfg.dim, padding_idx=0)
        nn.init.normal_(self.embedding.weight, 0.0, cfg.dim**-0.5)
        self.register_buffer("positions", sinusoid_table(MAX_POSITIONS, cfg.dim), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.layers))

    def forward(self, phonemes: Tensor, mask: Tensor) -> Tensor:
        x = self.embedding(phonemes.long()) * math.sqrt(self.cfg.dim)
        x = self.dropout(x + self.positions[: phonemes.shape[1]].unsqueeze(0)) * mask.unsqueeze(-1)
        for block in self.blocks:
            x = block(x, mask)
        return x
