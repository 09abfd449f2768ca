"""The acoustic model: text encoder, style encoder and decoder (with its postnet) trained together."""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from tts_triton.core.config import ModelConfig
from tts_triton.models.decoder import Decoder
from tts_triton.models.style_encoder import StyleEncoder
from tts_triton.models.text_encoder import TextEncoder


class AcousticOutput(NamedTuple):
    mel: Tensor  # [B, frames, n_mels], decoder output
    mel_post: Tensor  # [B, frames, n_mels], after the postnet
    gate: Tensor  # [B, frames / r] stop logits
    alignment: Tensor  # [B, frames / r, T]
    style: Tensor  # [B, style_dim]


class AcousticModel(nn.Module):
    """Phonemes + reference mel -> mel frames; teacher-forced in ``forward`` for training."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.text_encoder = TextEncoder(cfg.text)
        self.style_encoder = StyleEncoder(cfg.style, cfg.n_mels)
        self.decoder = Decoder(cfg)

    def forward(self, phonemes: Tensor, mask: Tensor, mels: Tensor, ref_mels: Tensor) -> AcousticOutput:
        """``phonemes [B, T]``, ``mask [B, T]`` (1 = valid), target ``mels [B, F, n_mels]`` (F a multiple
        of r), ``ref_mels [B, F_ref, n_mels]`` (the style reference)."""
        memory = self.text_encoder(phonemes, mask)
        style = self.style_encoder(ref_mels)
        mel, gate, alignment = self.decoder(memory, mask, style, mels)
        return AcousticOutput(mel, self.decoder.postnet(mel), gate, alignment, style)
