"""The tensor contract of every Triton model: names, dtypes and shapes, defined once.

The ONNX export names its inputs, outputs and dynamic axes from these specs, the repository
builder writes them into every ``config.pbtxt``, and the BLS decode loop and the client address
tensors through them. Shapes exclude the batch dimension of batched models; a string dimension
is dynamic (written ``-1`` in Triton configs) and names the ONNX dynamic axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_triton.core import fundamental
from tts_triton.core.config import ModelConfig

Dim = int | str

#: numpy dtype name -> Triton config data type.
TRITON_DTYPES = {"float32": "TYPE_FP32", "float16": "TYPE_FP16", "int32": "TYPE_INT32",
                 "int64": "TYPE_INT64", "bool": "TYPE_BOOL", "bytes": "TYPE_STRING"}
#: numpy dtype name -> tritonclient / pb_utils wire type.
WIRE_DTYPES = {"float32": "FP32", "float16": "FP16", "int32": "INT32", "int64": "INT64",
               "bool": "BOOL", "bytes": "BYTES"}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    dims: tuple[Dim, ...]
    optional: bool = False

    @property
    def triton_dims(self) -> list[int]:
        return [d if isinstance(d, int) else -1 for d in self.dims]

    @property
    def wire_dtype(self) -> str:
        return WIRE_DTYPES[self.dtype]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: True when the leading batch dimension is implicit (Triton ``max_batch_size > 0``).
    batched: bool = True
    #: Dynamic axes along which the network ignores zero padding (a ``mask`` input marks the real positions):
    #: requests that differ only there may be padded to the longest and run as one call.
    masked_axes: tuple[str, ...] = ()

    def input(self, name: str) -> TensorSpec:
        return _find(self.inputs, name, self.name)

    def output(self, name: str) -> TensorSpec:
        return _find(self.outputs, name, self.name)

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]


def _find(tensors: tuple[TensorSpec, ...], name: str, model: str) -> TensorSpec:
    for t in tensors:
        if t.name == name:
            return t
    raise KeyError(f"model {model!r} has no tensor {name!r}")


# Dynamic axis names.
TOKENS = "tokens"
FRAMES = "frames"
SAMPLES = "samples"
REF_FRAMES = "ref_frames"

TEXT_ENCODER = "text_encoder"
STYLE_ENCODER = "style_encoder"
DECODER = "decoder"
VOCODER = "vocoder"
ENCODE = "encode"
FIRST_DECODE = "first_decode"
TTS = "tts"
TTS_OFFLINE = "tts_offline"
#: Request parameter (string) of an in-band stop sent to ``tts``: the request id of the stream to end early.
#: The stop request carries an empty ``TEXT`` and gets a FINAL of its own; the named stream ends with a normal FINAL.
STOP_PARAMETER = "tts_stop"
#: Request parameter (bool, or the string ``"false"``) that opts one request out of the utterance cache.
CACHE_PARAMETER = "cache"
#: Request parameter (a string of at most 128 characters) naming whose cache entries a request may read and write:
#: part of the cache key (the gateway sends a digest of the request's API key; absent: the shared scope).
CACHE_SCOPE_PARAMETER = "cache_tenant"

# Metrics the models report beside Triton's own (Prometheus names).
#: Gauge of synthesis requests in progress, by ``model`` and ``instance``.
ACTIVE_METRIC = "tts_active_requests"
#: Counter of synthesis requests by ``model`` and ``outcome`` (how each ended: tts_triton.errors.KINDS).
REQUESTS_METRIC = "tts_requests_total"
#: Counter of the seconds the network models' ``execute`` spent, by ``model`` and ``phase``.
PHASE_METRIC = "tts_network_seconds_total"
#: The utterance cache's counters: lookups by ``outcome``, entry bytes by ``direction``, writes by ``outcome``.
CACHE_LOOKUPS_METRIC = "tts_cache_lookups_total"
CACHE_BYTES_METRIC = "tts_cache_bytes_total"
CACHE_WRITES_METRIC = "tts_cache_writes_total"

# Tensor names of the networks (``mel`` and ``audio`` spelled NET_ apart from the public MEL and AUDIO).
PHONEMES, MASK, MEMORY = "phonemes", "mask", "memory"
REF_MEL, STYLE = "ref_mel", "style"
NET_MEL, GATE, ALIGNMENT, NET_AUDIO = "mel", "gate", "alignment", "audio"
#: The vocoder's per-frame fundamental frequency and phase (:mod:`tts_triton.core.fundamental`).
FUNDAMENTAL = "fundamental"
STATE, ATTENTION = "state", "attention"

#: Suffix of a decoder output that carries the next value of a recurrent state input.
STATE_OUT_SUFFIX = "_out"


def f32(name: str, *dims: Dim) -> TensorSpec:
    return TensorSpec(name, "float32", dims)


def decoder_state_fields(cfg: ModelConfig) -> tuple[tuple[str, int], ...]:
    """The fixed-size parts of the decoder's recurrent state, (name, size) in the order ``state`` packs them."""
    d = cfg.decoder
    return (
        ("last_frame", cfg.n_mels),
        ("attention_hidden", d.attention_rnn_dim),
        ("attention_cell", d.attention_rnn_dim),
        ("decoder_hidden", d.decoder_rnn_dim),
        ("decoder_cell", d.decoder_rnn_dim),
        ("attention_context", cfg.text.dim),
    )


def decoder_states(cfg: ModelConfig) -> tuple[TensorSpec, ...]:
    """Recurrent state of the decoder, carried by the caller from one call to the next: ``state``, the
    :func:`decoder_state_fields` concatenated, and ``attention``, the attention weights and their running
    sum over the tokens. Two tensors, not eight: every tensor of a call costs the BLS and the decoder model
    a shared-memory hand-over per request."""
    return (f32(STATE, sum(size for _, size in decoder_state_fields(cfg))), f32(ATTENTION, 2, TOKENS))


def memory_parts(cfg: ModelConfig) -> tuple[int, int]:
    """The widths of the two parts of ``memory``, side by side on its last axis: the text encoder's output, which the
    attention reads, and its projection into the attention's keys. One tensor, not two: every tensor of a decoder
    call costs the BLS and the decoder model a shared-memory hand-over per request."""
    return cfg.text.dim, cfg.decoder.attention_dim


def text_encoder_spec(cfg: ModelConfig) -> ModelSpec:
    return ModelSpec(
        TEXT_ENCODER,
        inputs=(TensorSpec(PHONEMES, "int32", (TOKENS,)), f32(MASK, TOKENS)),
        outputs=(f32(MEMORY, TOKENS, sum(memory_parts(cfg))),),
        masked_axes=(TOKENS,),
    )


def style_encoder_spec(cfg: ModelConfig) -> ModelSpec:
    return ModelSpec(
        STYLE_ENCODER, inputs=(f32(REF_MEL, REF_FRAMES, cfg.n_mels),), outputs=(f32(STYLE, cfg.style.dim),)
    )


def decoder_spec(cfg: ModelConfig) -> ModelSpec:
    d = cfg.decoder
    states = decoder_states(cfg)
    context = (
        f32(MEMORY, TOKENS, sum(memory_parts(cfg))),
        f32(MASK, TOKENS),
        f32(STYLE, cfg.style.dim),
    )
    outputs = (
        f32(NET_MEL, d.frames_per_call, cfg.n_mels),
        f32(GATE, d.steps_per_call),
        f32(ALIGNMENT, d.steps_per_call, TOKENS),
        *(TensorSpec(s.name + STATE_OUT_SUFFIX, s.dtype, s.dims) for s in states),
    )
    return ModelSpec(DECODER, inputs=context + states, outputs=outputs, masked_axes=(TOKENS,))


#: Outputs the decode loop never reads; the BLS does not request them (direct callers may).
DIAGNOSTIC_OUTPUTS = frozenset({ALIGNMENT})


def vocoder_spec(cfg: ModelConfig) -> ModelSpec:
    """The mel and, where the generator draws its lowest phases from it (``VocoderConfig.harmonic``), the mel's
    fundamental track, frame by frame."""
    track = (f32(FUNDAMENTAL, FRAMES, fundamental.FIELDS),) if cfg.vocoder.harmonic else ()
    return ModelSpec(VOCODER, inputs=(f32(NET_MEL, FRAMES, cfg.n_mels), *track), outputs=(f32(NET_AUDIO, SAMPLES),))


def network_specs(cfg: ModelConfig) -> dict[str, ModelSpec]:
    """The four exported networks, keyed by Triton model name."""
    specs = (text_encoder_spec(cfg), style_encoder_spec(cfg), decoder_spec(cfg), vocoder_spec(cfg))
    return {s.name: s for s in specs}


#: The ensembles: name -> member networks in order. A member is fed from the ensemble's inputs and the outputs of
#: the members before it; every member's outputs are the ensemble's. ``encode``: the text and a reference audio's
#: style side by side; ``first_decode``: a sentence's text encoding and its first decoder call in one request, which
#: saves the BLS a round trip before its first chunk.
ENSEMBLES: dict[str, tuple[str, ...]] = {ENCODE: (TEXT_ENCODER, STYLE_ENCODER), FIRST_DECODE: (TEXT_ENCODER, DECODER)}


def ensemble_spec(cfg: ModelConfig, name: str) -> ModelSpec:
    """The tensors of ensemble ``name`` (:data:`ENSEMBLES`): what its members take that no member before them
    produced, and everything they produce; padded along the axes that every member masks."""
    members = [network_specs(cfg)[m] for m in ENSEMBLES[name]]
    inputs: dict[str, TensorSpec] = {}
    outputs: dict[str, TensorSpec] = {}
    for member in members:
        inputs.update({t.name: t for t in member.inputs if t.name not in outputs and t.name not in inputs})
        outputs.update({t.name: t for t in member.outputs})
    masked = tuple(a for a in members[0].masked_axes if all(a in m.masked_axes for m in members))
    return ModelSpec(name, inputs=tuple(inputs.values()), outputs=tuple(outputs.values()), masked_axes=masked)


def ensemble_specs(cfg: ModelConfig) -> dict[str, ModelSpec]:
    """Every ensemble's :func:`ensemble_spec`, keyed by Triton model name."""
    return {name: ensemble_spec(cfg, name) for name in ENSEMBLES}


# Tensor names of the public ``tts`` / ``tts_offline`` contract.
TEXT, VOICE, EMOTION = "TEXT", "VOICE", "EMOTION"
REFERENCE_AUDIO, REFERENCE_SAMPLE_RATE = "REFERENCE_AUDIO", "REFERENCE_SAMPLE_RATE"
AUDIO, SAMPLE_RATE, MEL = "AUDIO", "SAMPLE_RATE", "MEL"
SPEED, PITCH, VOLUME, WORDS = "SPEED", "PITCH", "VOLUME", "WORDS"
OUTPUT_SAMPLE_RATE = "OUTPUT_SAMPLE_RATE"
#: The rates (Hz) ``OUTPUT_SAMPLE_RATE`` may ask for: telephony, wideband, the model's own 22050, OpenAI's 24 kHz,
#: CD and video. Absent: the model's own rate (``audio.SAMPLE_RATE``).
OUTPUT_SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)


@dataclass(frozen=True)
class ControlRange:
    """A speech control input: FP32 [1], ``neutral`` (as trained) when absent, valid in [low, high]."""

    name: str
    low: float
    high: float
    neutral: float
    unit: str


#: Speaking rate (a factor: 2 is twice as fast), pitch shift (semitones) and gain (dB).
CONTROLS = {c.name: c for c in (ControlRange(SPEED, 0.5, 2.0, 1.0, "x"), ControlRange(PITCH, -12.0, 12.0, 0.0, "st"),
                                ControlRange(VOLUME, -30.0, 12.0, 0.0, "dB"))}

#: The inputs of ``tts`` / ``tts_offline``; they do not depend on the model config (clients use them as is).
TTS_INPUTS = (
    TensorSpec(TEXT, "bytes", (1,)),
    TensorSpec(VOICE, "bytes", (1,), optional=True),
    TensorSpec(EMOTION, "bytes", (1,), optional=True),
    TensorSpec(REFERENCE_AUDIO, "float32", (-1,), optional=True),
    TensorSpec(REFERENCE_SAMPLE_RATE, "int32", (1,), optional=True),
    *(TensorSpec(name, "float32", (1,), optional=True) for name in CONTROLS),
    TensorSpec(OUTPUT_SAMPLE_RATE, "int32", (1,), optional=True),
)


def tts_spec(cfg: ModelConfig, name: str = TTS) -> ModelSpec:
    """The public contract of ``tts`` (streaming) and ``tts_offline`` (one response)."""
    return ModelSpec(
        name,
        inputs=TTS_INPUTS,
        outputs=(
            f32(AUDIO, -1),
            TensorSpec(SAMPLE_RATE, "int32", (1,)),
            # Sent only when the client asks for it: decoder mel frames (before the postnet).
            f32(MEL, -1, cfg.n_mels),
            # Sent only when asked for: a JSON list of the words this chunk completes (``tts_offline``: all),
            # each {"word", "start", "end" (seconds on the stream's timeline), "text_start", "text_end"
            # (its character span in TEXT)}.
            TensorSpec(WORDS, "bytes", (1,)),
        ),
        batched=False,
    )
