"""Tacotron2-style autoregressive attention decoder (Shen et al., 2018), conditioned on a style vector.

One decoder *step* reads the last emitted mel frame through the prenet, advances the attention
LSTM, attends over the encoder memory with location-sensitive attention, advances the decoder
LSTM and emits ``frames_per_step`` (r) mel frames plus a stop-gate logit. The step is a pure
function of :class:`DecoderState`, so training (teacher forcing), the reference synthesizer and the
exported K-step graph all run the very same code.

The postnet is not part of the step: it is a non-causal convolution stack and runs with the
vocoder on each streamed chunk (see :class:`tts_triton.models.stages.VocoderStage`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tts_triton.core.config import DecoderConfig, ModelConfig
from tts_triton.models.layers import ConvNorm, lstm_cell, masked_logits


class DecoderState(NamedTuple):
    """Everything the decoder carries from one step to the next (packed for serving by
    :class:`~tts_triton.models.stages.DecoderStage`)."""

    last_frame: Tensor  # [B, n_mels]
    attention_hidden: Tensor  # [B, attention_rnn_dim]
    attention_cell: Tensor
    decoder_hidden: Tensor  # [B, decoder_rnn_dim]
    decoder_cell: Tensor
    attention_weights: Tensor  # [B, T]
    attention_weights_cum: Tensor  # [B, T]
    attention_context: Tensor  # [B, memory_dim]


class Prenet(nn.Module):
    """Bottleneck of linear + ReLU layers with dropout, applied in training only."""

    def __init__(self, in_dim: int, dims: tuple[int, ...], dropout: float) -> None:
        super().__init__()
        sizes = zip((in_dim, *dims[:-1]), dims, strict=True)
        self.layers = nn.ModuleList(nn.Linear(i, o, bias=False) for i, o in sizes)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), self.dropout, self.training)
        return x


class LocationSensitiveAttention(nn.Module):
    """Additive attention whose energies also see the previous and cumulative alignments."""

    def __init__(self, query_dim: int, memory_dim: int, cfg: DecoderConfig) -> None:
        super().__init__()
        self.query_layer = nn.Linear(query_dim, cfg.attention_dim, bias=False)
        self.memory_layer = nn.Linear(memory_dim, cfg.attention_dim, bias=False)
        self.location_conv = nn.Conv1d(2, cfg.location_filters, cfg.location_kernel, padding=cfg.location_kernel // 2,
                                       bias=False)
        self.location_dense = nn.Linear(cfg.location_filters, cfg.attention_dim, bias=False)
        self.v = nn.Linear(cfg.attention_dim, 1, bias=False)

    def forward(self, query: Tensor, memory: Tensor, processed_memory: Tensor, weights_cat: Tensor,
                mask: Tensor) -> tuple[Tensor, Tensor]:
        """-> (context ``[B, memory_dim]``, weights ``[B, T]``); ``weights_cat`` is ``[B, 2, T]``."""
        location = self.location_dense(self.location_conv(weights_cat).transpose(1, 2))
        energies = self.v(torch.tanh(self.query_layer(query).unsqueeze(1) + location + processed_memory)).squeeze(-1)
        weights = torch.softmax(masked_logits(energies, mask), dim=-1)
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
        return context, weights


class Postnet(nn.Module):
    """Five conv layers predicting a residual that refines the decoder's mel: ``[B, T, n_mels]`` in and out."""

    def __init__(self, n_mels: int, cfg: DecoderConfig) -> None:
        super().__init__()
        dims = [n_mels] + [cfg.postnet_dim] * (cfg.postnet_layers - 1) + [n_mels]
        self.convs = nn.ModuleList(ConvNorm(i, o, cfg.postnet_kernel) for i, o in zip(dims[:-1], dims[1:], strict=True))
        self.dropout = cfg.dropout

    def forward(self, mel: Tensor) -> Tensor:
        x = mel.transpose(1, 2)
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i < len(self.convs) - 1:
                x = torch.tanh(x)
            x = F.dropout(x, self.dropout, self.training)
        return mel + x.transpose(1, 2)


class Decoder(nn.Module):
    """The attention decoder; see the module docstring."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.decoder
        self.cfg = cfg
        self.n_mels = cfg.n_mels
        self.r = d.frames_per_step
        memory_dim, style_dim = cfg.text.dim, cfg.style.dim
        self.prenet = Prenet(cfg.n_mels, d.prenet_dims, d.prenet_dropout)
        self.attention_rnn = nn.LSTMCell(d.prenet_dims[-1] + memory_dim + style_dim, d.attention_rnn_dim)
        self.attention = LocationSensitiveAttention(d.attention_rnn_dim, memory_dim, d)
        self.decoder_rnn = nn.LSTMCell(d.attention_rnn_dim + memory_dim + style_dim, d.decoder_rnn_dim)
        self.projection = nn.Linear(d.decoder_rnn_dim + memory_dim, cfg.n_mels * self.r)
        self.gate = nn.Linear(d.decoder_rnn_dim + memory_dim, 1)
        self.postnet = Postnet(cfg.n_mels, d)

    def process_memory(self, memory: Tensor) -> Tensor:
        """The attention's key projection of the encoder memory, computed once per sentence."""
        return self.attention.memory_layer(memory)

    def initial_state(self, memory: Tensor) -> DecoderState:
        """All-zero state for a batch of encoder memories ``[B, T, memory_dim]`` (the <GO> frame is zeros)."""
        b, t, _ = memory.shape
        d = self.cfg.decoder

        def zeros(*shape: int) -> Tensor:
            return memory.new_zeros(b, *shape)

        return DecoderState(zeros(self.n_mels), zeros(d.attention_rnn_dim), zeros(d.attention_rnn_dim),
                            zeros(d.decoder_rnn_dim), zeros(d.decoder_rnn_dim), zeros(t), zeros(t),
                            zeros(memory.shape[2]))

    def step(self, state: DecoderState, memory: Tensor, processed_memory: Tensor, mask: Tensor,
             style: Tensor) -> tuple[Tensor, Tensor, DecoderState]:
        """One decoder step -> (frames ``[B, r, n_mels]``, gate logit ``[B]``, next state)."""
        s = state
        x = torch.cat([self.prenet(s.last_frame), s.attention_context, style], dim=-1)
        att_h, att_c = lstm_cell(x, s.attention_hidden, s.attention_cell, self.attention_rnn)
        att_h = F.dropout(att_h, self.cfg.decoder.dropout, self.training)
        weights_cat = torch.stack([s.attention_weights, s.attention_weights_cum], dim=1)
        context, weights = self.attention(att_h, memory, processed_memory, weights_cat, mask)
        x = torch.cat([att_h, context, style], dim=-1)
        dec_h, dec_c = lstm_cell(x, s.decoder_hidden, s.decoder_cell, self.decoder_rnn)
        dec_h = F.dropout(dec_h, self.cfg.decoder.dropout, self.training)
        out = torch.cat([dec_h, context], dim=-1)
        frames = self.projection(out).view(-1, self.r, self.n_mels)
        gate = self.gate(out).squeeze(-1)
        nxt = DecoderState(frames[:, -1], att_h, att_c, dec_h, dec_c, weights, s.attention_weights_cum + weights,
                           context)
        return frames, gate, nxt

    def run(self, state: DecoderState, steps: int, memory: Tensor, processed_memory: Tensor, mask: Tensor,
            style: Tensor, teacher: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, DecoderState]:
        """``steps`` decoder steps -> (mel ``[B, steps*r, n_mels]``, gates ``[B, steps]``, alignments
        ``[B, steps, T]``, state). Free-running (what one exported decoder call computes), or, with
        ``teacher [B, steps - 1, n_mels]``, step t reads ``teacher[:, t - 1]`` instead of its own last frame."""
        frames, gates, alignments = [], [], []
        for t in range(steps):
            if teacher is not None and t > 0:
                state = state._replace(last_frame=teacher[:, t - 1])
            f, g, state = self.step(state, memory, processed_memory, mask, style)
            frames.append(f)
            gates.append(g)
            alignments.append(state.attention_weights)
        return torch.cat(frames, dim=1), torch.stack(gates, dim=1), torch.stack(alignments, dim=1), state

    def forward(self, memory: Tensor, mask: Tensor, style: Tensor, mels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Teacher-forced decoding of target ``mels [B, frames, n_mels]`` (frames a multiple of r).

        -> (mel ``[B, frames, n_mels]``, gate logits ``[B, frames / r]``, alignments ``[B, frames / r, T]``).
        Step t reads the last frame of step t - 1's group of r target frames (zeros before the first step).
        """
        steps = mels.shape[1] // self.r
        teacher = mels[:, self.r - 1 :: self.r][:, : steps - 1]
        mel, gate, alignment, _ = self.run(self.initial_state(memory), steps, memory, self.process_memory(memory),
                                           mask, style, teacher)
        return mel, gate, alignment
