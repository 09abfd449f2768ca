"""The vocoder's generator for a :class:`~tts_triton.core.config.VocoderConfig`: HiFi-GAN
(:mod:`~tts_triton.models.hifigan`) or the STFT-predicting one (:mod:`~tts_triton.models.vocos`). Both map a
log-mel ``[B, n_mels, frames]`` to audio ``[B, 1, frames * HOP_LENGTH]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from tts_triton.core.config import VocoderConfig
from tts_triton.models.hifigan import Generator, load_generator_state
from tts_triton.models.vocos import VocosGenerator


def build_generator(cfg: VocoderConfig) -> nn.Module:
    """An untrained generator of ``cfg.variant`` (initialised from torch's current random state)."""
    return VocosGenerator(cfg) if cfg.vocos else Generator(cfg)


def inference_generator(cfg: VocoderConfig, state: Mapping[str, Any]) -> nn.Module:
    """A generator of ``cfg`` holding ``state`` (a trainable generator's), ready for inference and export:
    HiFi-GAN's weight norm folded into plain weights."""
    generator = build_generator(cfg)
    load_generator_state(generator, state)
    if isinstance(generator, Generator):
        generator.remove_weight_norm()
    return generator
