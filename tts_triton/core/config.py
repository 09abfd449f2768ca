"""Model hyperparameters and serving constants, defined once.

A checkpoint stores the :class:`ModelConfig` it was trained with (``ModelConfig.to_dict``), and
everything downstream (export, the Triton configs, the BLS decode loop, the reference
synthesizer) reads its numbers from that object rather than from literals of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tts_triton.core import audio
from tts_triton.core.symbols import N_SYMBOLS


@dataclass(frozen=True)
class TextEncoderConfig:
    """Phoneme embedding + Transformer encoder with convolutional feed-forward blocks."""

    n_symbols: int = N_SYMBOLS
    dim: int = 256
    layers: int = 4
    heads: int = 2
    ffn_dim: int = 512
    ffn_kernel: int = 5
    dropout: float = 0.1


@dataclass(frozen=True)
class StyleEncoderConfig:
    """Global style tokens: reference encoder (conv2d stack + GRU) and attention over tokens."""

    conv_channels: tuple[int, ...] = (32, 32, 64, 64, 128, 128)
    gru_dim: int = 128
    tokens: int = 10
    heads: int = 4
    dim: int = 128


@dataclass(frozen=True)
class DecoderConfig:
    """Tacotron2 attention decoder emitting ``frames_per_step`` mel frames per step."""

    prenet_dims: tuple[int, ...] = (256, 256)
    prenet_dropout: float = 0.5
    attention_rnn_dim: int = 384
    decoder_rnn_dim: int = 384
    attention_dim: int = 128
    location_filters: int = 32
    location_kernel: int = 31
    frames_per_step: int = 3  # r
    steps_per_call: int = 8  # K: decoder steps unrolled into one exported call
    postnet_dim: int = 256
    postnet_kernel: int = 5
    postnet_layers: int = 5
    dropout: float = 0.1
    #: Hard limit on decoder steps: ``max_steps_per_token * tokens + max_steps_extra``.
    max_steps_per_token: int = 8
    max_steps_extra: int = 16

    @property
    def frames_per_call(self) -> int:
        return self.frames_per_step * self.steps_per_call

    def max_steps(self, n_tokens: int) -> int:
        """The max-steps guard of the decode loop for an input of ``n_tokens`` phoneme ids."""
        return self.max_steps_per_token * n_tokens + self.max_steps_extra


#: HiFi-GAN generator variants from the paper (Kong et al., 2020).
HIFIGAN_VARIANTS: dict[str, dict[str, Any]] = {
    "v1": dict(
        resblock="1", upsample_rates=(8, 8, 2, 2), upsample_kernel_sizes=(16, 16, 4, 4),
        upsample_initial_channel=512, resblock_kernel_sizes=(3, 7, 11),
        resblock_dilation_sizes=((1, 3, 5), (1, 3, 5), (1, 3, 5)),
    ),
    "v2": dict(
        resblock="1", upsample_rates=(8, 8, 2, 2), upsample_kernel_sizes=(16, 16, 4, 4),
        upsample_initial_channel=128, resblock_kernel_sizes=(3, 7, 11),
        resblock_dilation_sizes=((1, 3, 5), (1, 3, 5), (1, 3, 5)),
    ),
    "v3": dict(
        resblock="2", upsample_rates=(8, 8, 4), upsample_kernel_sizes=(16, 16, 8),
        upsample_initial_channel=256, resblock_kernel_sizes=(3, 5, 7),
        resblock_dilation_sizes=((1, 2), (2, 6), (3, 12)),
    ),
}

#: Generators that predict each frame's STFT and invert it (:mod:`tts_triton.models.vocos`): ConvNeXt blocks of
#: ``dim`` channels with an MLP of ``intermediate``, depthwise kernels of ``kernel`` frames. 8 blocks of kernel 3
#: reach 9 frames each side, 11 with the inverse STFT: within the served vocoder context of 12.
VOCOS_VARIANTS: dict[str, dict[str, Any]] = {
    "vocos": dict(dim=256, intermediate=768, layers=8, kernel=3),
}


#: The mel layout of configs that do not record one: the LJSpeech convention, 80 bins over 0-8000 Hz.
LEGACY_N_MELS, LEGACY_MEL_FMAX = 80, 8000.0


@dataclass(frozen=True)
class VocoderConfig:
    """The generator; ``variant`` picks one of :data:`HIFIGAN_VARIANTS` or :data:`VOCOS_VARIANTS`. ``mel_match``:
    the largest |log gain| by which :class:`tts_triton.models.mel_match.MelMatch` rescales the generator's output
    towards its input mel at inference (0 turns it off); training never uses it. ``harmonic_phase``: an STFT
    generator takes its lowest bins' phase from :class:`tts_triton.models.harmonic.HarmonicPhase` at inference,
    driven by the mel's fundamental (:mod:`tts_triton.core.fundamental`); training never uses it either."""

    variant: str = "v2"
    n_mels: int = audio.N_MELS
    mel_match: float = 4.0
    harmonic_phase: bool = True

    def __post_init__(self) -> None:
        if self.variant not in HIFIGAN_VARIANTS and self.variant not in VOCOS_VARIANTS:
            raise ValueError(f"unknown vocoder variant {self.variant!r}; "
                             f"choose from {sorted(HIFIGAN_VARIANTS) + sorted(VOCOS_VARIANTS)}")

    @property
    def vocos(self) -> bool:
        """Whether the generator predicts the STFT (:data:`VOCOS_VARIANTS`) rather than upsampling (HiFi-GAN)."""
        return self.variant in VOCOS_VARIANTS

    @property
    def harmonic(self) -> bool:
        """Whether the vocoder takes the fundamental track (an STFT generator with ``harmonic_phase`` on)."""
        return self.vocos and self.harmonic_phase

    @property
    def params(self) -> dict[str, Any]:
        return VOCOS_VARIANTS[self.variant] if self.vocos else HIFIGAN_VARIANTS[self.variant]

    @property
    def hop_length(self) -> int:
        if self.vocos:  # its inverse STFT overlap-adds one frame per hop
            return audio.HOP_LENGTH
        prod = 1
        for rate in self.params["upsample_rates"]:
            prod *= rate
        return prod


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild the four networks."""

    n_mels: int = audio.N_MELS
    #: Upper edge (Hz) of the mel the networks were trained on; checked against :mod:`tts_triton.core.audio`.
    mel_fmax: float = audio.FMAX
    text: TextEncoderConfig = field(default_factory=TextEncoderConfig)
    style: StyleEncoderConfig = field(default_factory=StyleEncoderConfig)
    decoder: DecoderConfig = field(default_factory=DecoderConfig)
    vocoder: VocoderConfig = field(default_factory=VocoderConfig)

    def __post_init__(self) -> None:
        if self.vocoder.hop_length != audio.HOP_LENGTH:
            raise ValueError(f"vocoder upsamples by {self.vocoder.hop_length}, audio hop is {audio.HOP_LENGTH}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def check_mel(self) -> None:
        """Raise ``ValueError`` unless the networks read the mel :mod:`tts_triton.core.audio` computes."""
        if (self.n_mels, self.mel_fmax) != (audio.N_MELS, audio.FMAX):
            raise ValueError(
                f"the networks were trained on {self.n_mels} mel bins up to {self.mel_fmax:g} Hz, but this version "
                f"computes {audio.N_MELS} up to {audio.FMAX:g} Hz; carry the checkpoint over with "
                "`python -m tts_triton.training.remel` and train it further"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        def build(kind: type, values: dict[str, Any]) -> Any:
            kwargs = {}
            for f in dataclasses.fields(kind):
                if f.name in values:
                    value = values[f.name]
                    kwargs[f.name] = tuple(map(_tuplify, value)) if isinstance(value, list) else value
            return kind(**kwargs)

        n_mels = data.get("n_mels", LEGACY_N_MELS)
        return cls(
            n_mels=n_mels,
            mel_fmax=data.get("mel_fmax", LEGACY_MEL_FMAX),
            text=build(TextEncoderConfig, data.get("text", {})),
            style=build(StyleEncoderConfig, data.get("style", {})),
            decoder=build(DecoderConfig, data.get("decoder", {})),
            vocoder=build(VocoderConfig, {"n_mels": n_mels, **data.get("vocoder", {})}),
        )


def _tuplify(value: Any) -> Any:
    return tuple(_tuplify(v) for v in value) if isinstance(value, list) else value


def smallest_bucket(size: int, buckets: Sequence[int], unit: str) -> int:
    """The smallest of ascending ``buckets`` that holds ``size`` (``unit``: what is counted, for the error);
    ``ValueError`` when none does."""
    for bucket in buckets:
        if size <= bucket:
            return bucket
    raise ValueError(f"{size} {unit} exceed the largest bucket {buckets[-1]}")


@dataclass(frozen=True)
class StreamingConfig:
    """How the server cuts the decoder's mel stream into vocoder calls.

    Each vocoder call sees ``left_context`` already-vocoded frames and ``right_context`` frames of
    lookahead around the chunk it emits; the context samples are cut away, so the concatenated
    stream matches one-shot vocoding of the whole mel. Chunks grow along ``chunk_frames`` (the
    last size repeats) so that the first audio leaves early and each chunk is ready before the audio
    before it has played: once the first is out (24 frames decoded), the second needs 24 more frames
    decoded while 8 play, the third 72 while 24 play, the fourth 144 while 72 play, so a stream decoding
    at a real-time factor up to 1/3 (vocoder included) never waits. They grow along the stream, not each
    sentence (:meth:`chunk_index_after`): a later sentence starts while the audio before it plays, and small
    chunks there would only cost responses and vocoder context.
    """

    chunk_frames: tuple[int, ...] = (8, 16, 48, 68)
    #: Frames of context each side: enough for streamed audio to match one-shot vocoding at >= 30 dB SNR
    #: (tested; ``scripts/vocoder_context.py`` measures it). The vocoder stage reaches further than its generator
    #: alone (the postnet's convolutions too): 12 frames of lookahead left a chunk at 19 dB on the tenth voice.
    #: 16 + a first chunk of 8 is exactly one decoder call (K * r = 24 frames), so the first audio needs no
    #: second call; 12 + 68 + 16 fills the 96-frame window, 12 + 16 + 16 the 48-frame one.
    left_context: int = 12
    right_context: int = 16
    #: Encoder memory is padded to the smallest bucket that fits so that streams share batches.
    token_buckets: tuple[int, ...] = (32, 64, 128, 256, 512)
    #: Every vocoder call holds one of these frame counts (context included): the planner widens a window's
    #: left context to the smallest that fits (into silence before the sentence). Two sizes: streams at
    #: different points share a vocoder batch in at most two graph replays (each shape costs one), at about
    #: 1.2x the frames of the tightest windows. Every shape has its CUDA graph or engine profile.
    vocoder_frames: tuple[int, ...] = (48, 96)
    #: Latency first: a stream keeps one vocoder call in flight, and decodes on only once its first chunk is
    #: vocoded, so that fewer of its calls queue ahead of other streams' first ones: a faster first chunk under
    #: load for less throughput. Off: every ready window is vocoded at once, beside the next decoder call.
    first_chunk_first: bool = False

    def __post_init__(self) -> None:
        longest = self.left_context + max(self.chunk_frames) + self.right_context
        if sorted(self.vocoder_frames) != list(self.vocoder_frames) or self.vocoder_frames[-1] < longest:
            raise ValueError(f"vocoder_frames must ascend and reach {longest} frames: {self.vocoder_frames}")

    @property
    def max_tokens(self) -> int:
        return self.token_buckets[-1]

    def bucket(self, n_tokens: int) -> int:
        """Smallest token bucket holding ``n_tokens``."""
        return smallest_bucket(n_tokens, self.token_buckets, "phoneme tokens")

    def chunk_index_after(self, frames: int) -> int:
        """Where the schedule stands once ``frames`` have streamed: the first chunk of ``chunk_frames`` that they
        would not have held (0 before the stream's first audio). A sentence whose chunks start there has about as
        much audio before its first chunk as the schedule's own chunk of that index has."""
        index, streamed = 0, 0
        while index < len(self.chunk_frames) - 1 and streamed + self.chunk_frames[index] <= frames:
            streamed += self.chunk_frames[index]
            index += 1
        return index

    def chunk_size(self, index: int) -> int:
        """Frames in the ``index``-th chunk of a sentence."""
        return self.chunk_frames[min(index, len(self.chunk_frames) - 1)]

    def vocoder_bucket(self, frames: int) -> int:
        """Smallest vocoder frame count holding ``frames``."""
        return smallest_bucket(frames, self.vocoder_frames, "frames")


STREAMING = StreamingConfig()


@dataclass(frozen=True)
class RequestLimits:
    """What one ``tts`` request may ask for; the service rejects more with INVALID_ARG."""

    max_text_chars: int = 20_000
    min_reference_seconds: float = 0.5
    max_reference_seconds: float = 30.0
    reference_rates: tuple[int, int] = (8_000, 96_000)
    #: Server-side time limit of one request (a client's own request ``timeout`` can only shorten it).
    max_request_seconds: float = 600.0

    def reference_frames(self) -> tuple[int, int]:
        """The fewest and most mel frames of a reference clip (after resampling to the model's rate)."""
        rate, hop = audio.SAMPLE_RATE, audio.HOP_LENGTH
        # one mel frame per hop (tts_triton.core.audio); one frame of slack for the resampler's rounding
        return int(self.min_reference_seconds * rate) // hop, int(self.max_reference_seconds * rate) // hop + 1


LIMITS = RequestLimits()

