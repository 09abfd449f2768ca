"""Small building blocks shared by the networks."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

#: Added to attention logits at padded positions; fp16-safe and exp() underflows to exactly 0 in fp32.
MASK_BIAS = -1e4


def masked_logits(logits: Tensor, mask: Tensor) -> Tensor:
    """``logits`` with padded positions (``mask == 0``; float mask, 1 = valid) pushed to ``MASK_BIAS``."""
    return logits * mask + (1.0 - mask) * MASK_BIAS


def lstm_cell(x: Tensor, h: Tensor, c: Tensor, cell: nn.LSTMCell) -> tuple[Tensor, Tensor]:
    """One step of ``cell`` written with plain matmuls, so the ONNX graph holds only Gemm/Sigmoid/Tanh.

    Numerically the same as ``cell(x, (h, c))``; used in the exported decoder step.
    """
    gates = F.linear(x, cell.weight_ih, cell.bias_ih) + F.linear(h, cell.weight_hh, cell.bias_hh)
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


class ConvNorm(nn.Sequential):
    """Conv1d ('same' padding) followed by batch norm, over ``[B, C, T]``."""

    def __init__(self, in_dim: int, out_dim: int, kernel: int) -> None:
        super().__init__(nn.Conv1d(in_dim, out_dim, kernel, padding=kernel // 2), nn.BatchNorm1d(out_dim))
