"""The four inference stages exactly as the Triton models run them, built by composition.

Each stage takes and returns tensors in the order of its :mod:`tts_triton.core.contract` spec. ONNX
export traces these modules, and the in-process reference synthesizer calls them directly, so the
server and the oracle compute the same graphs.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from tts_triton.core import contract, fundamental
from tts_triton.models.acoustic import AcousticModel
from tts_triton.models.decoder import Decoder, DecoderState, Postnet
from tts_triton.models.harmonic import HarmonicPhase
from tts_triton.models.mel_match import MelMatch
from tts_triton.models.stft import FrameIstft, FrameStft
from tts_triton.models.style_encoder import StyleEncoder
from tts_triton.models.text_encoder import TextEncoder


class TextEncoderStage(nn.Module):
    """(phonemes, mask) -> (memory,): the encoder's output and its projection into the attention's keys, side by side
    (:func:`~tts_triton.core.contract.memory_parts`)."""

    def __init__(self, encoder: TextEncoder, decoder: Decoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, phonemes: Tensor, mask: Tensor) -> tuple[Tensor]:
        memory = self.encoder(phonemes, mask)
        return (torch.cat([memory, self.decoder.process_memory(memory)], dim=-1),)


class StyleEncoderStage(nn.Module):
    """(ref_mel,) -> (style,)."""

    def __init__(self, encoder: StyleEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, ref_mel: Tensor) -> tuple[Tensor]:
        return (self.encoder(ref_mel),)


class DecoderStage(nn.Module):
    """K unrolled decoder steps with the recurrent state as explicit inputs and outputs, packed as the
    contract's ``state`` and ``attention`` (:func:`~tts_triton.core.contract.decoder_states`)."""

    def __init__(self, decoder: Decoder) -> None:
        super().__init__()
        self.decoder = decoder
        self.steps = decoder.cfg.decoder.steps_per_call
        self.fields = contract.decoder_state_fields(decoder.cfg)

    def forward(self, memory: Tensor, mask: Tensor, style: Tensor, state: Tensor, attention: Tensor
                ) -> tuple[Tensor, ...]:
        parts = dict(zip((name for name, _ in self.fields), state.split([size for _, size in self.fields], dim=-1),
                         strict=True))
        unpacked = DecoderState(**parts, attention_weights=attention[:, 0], attention_weights_cum=attention[:, 1])
        encoded, keys = memory.split(contract.memory_parts(self.decoder.cfg), dim=-1)
        mel, gate, alignment, nxt = self.decoder.run(unpacked, self.steps, encoded, keys, mask, style)
        packed = torch.cat([getattr(nxt, name) for name, _ in self.fields], dim=-1)
        return mel, gate, alignment, packed, torch.stack((nxt.attention_weights, nxt.attention_weights_cum), dim=1)


class VocoderStage(nn.Module):
    """(mel ``[B, frames, n_mels]``[, fundamental ``[B, frames, 2]``]) -> (audio ``[B, frames * hop]``,): the postnet,
    then :meth:`vocode`. The fundamental track (:mod:`tts_triton.core.fundamental`, of the mel given here) is an
    input of the served network where the generator takes it (``VocoderConfig.harmonic``); in process it defaults
    to the mel's own."""

    def __init__(self, postnet: Postnet, generator: nn.Module, mel_match: float) -> None:
        super().__init__()
        self.postnet = postnet
        self.generator = generator
        self.mel_match = MelMatch(mel_match) if mel_match > 0 else None

    def track(self, mel: Tensor, origin: int = 0) -> tuple[Tensor, ...]:
        """``(fundamental,)`` of log-mel ``[B, frames, n_mels]`` vocoded in one piece, phase 0 at frame ``origin``
        (:func:`~tts_triton.core.fundamental.track`), where the generator takes it; else ``()``. For in-process
        callers: ``stage(mel, *stage.track(mel))``."""
        if getattr(self.generator, "harmonic", None) is None:
            return ()
        tracks = [fundamental.track(m, origin) for m in mel.detach().float().cpu().numpy()]
        return (torch.from_numpy(np.stack(tracks)).to(mel.device),)

    def _own_track(self, mel: Tensor) -> Tensor | None:
        """:meth:`track`'s tensor, or None where the generator takes none."""
        return next(iter(self.track(mel)), None)

    def vocode(self, mel: Tensor, fundamental: Tensor | None = None) -> Tensor:
        """Log-mel ``[B, frames, n_mels]`` -> audio ``[B, frames * hop]``: the generator, then the mel match.
        ``fundamental`` defaults to ``mel``'s own track vocoded in one piece (:meth:`track`)."""
        fundamental = self._own_track(mel) if fundamental is None else fundamental
        x = mel.transpose(1, 2)
        samples = (self.generator(x) if fundamental is None else self.generator(x, fundamental)).squeeze(1)
        return samples if self.mel_match is None else self.mel_match(samples, mel)

    def forward(self, mel: Tensor, fundamental: Tensor | None = None) -> tuple[Tensor]:
        # the track is the decoder's mel's, as the pipeline makes it, not the postnet's
        fundamental = self._own_track(mel) if fundamental is None else fundamental
        return (self.vocode(self.postnet(mel), fundamental),)


def build_stages(acoustic: AcousticModel, generator: nn.Module) -> dict[str, nn.Module]:
    """The four stages keyed by Triton model name, in eval mode."""
    stages = {
        contract.TEXT_ENCODER: TextEncoderStage(acoustic.text_encoder, acoustic.decoder),
        contract.STYLE_ENCODER: StyleEncoderStage(acoustic.style_encoder),
        contract.DECODER: DecoderStage(acoustic.decoder),
        contract.VOCODER: VocoderStage(acoustic.decoder.postnet, generator, acoustic.cfg.vocoder.mel_match),
    }
    return {name: stage.eval() for name, stage in stages.items()}


def half_precision(stage: nn.Module) -> nn.Module:
    """``stage`` with fp16 weights, in place, except the mel match, the STFTs (:mod:`tts_triton.models.stft`) and the
    harmonic phase, rebuilt in fp32 (they are not fp16-safe, and their buffers are exact only when built in fp32).

    The stage then takes fp16 inputs; its outputs are fp16, or fp32 where those parts produced them.
    """
    stage.half()
    for parent in list(stage.modules()):
        for name, child in parent.named_children():
            if isinstance(child, MelMatch | FrameStft | FrameIstft | HarmonicPhase):  # all hold buffers, none weights
                fresh = MelMatch(child.max_log_gain) if isinstance(child, MelMatch) else type(child)()
                setattr(parent, name, fresh.to(next(child.buffers()).device))
    return stage

