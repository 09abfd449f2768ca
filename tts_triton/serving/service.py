"""Request handling of the ``tts`` / ``tts_offline`` models, free of Triton.

:func:`parse_request` validates the raw input tensors, :class:`TTSService` turns a request into
sentences (the front end's plan: plain text or SSML) and a style (the voice bank or the reference audio),
then streams audio through the :class:`~tts_triton.serving.pipeline.Pipeline` with the request's speech
controls (SPEED, PITCH, VOLUME) and, when asked for, word timestamps. Bad input raises
:class:`~tts_triton.errors.InvalidInput` naming the input, from whichever of these finds it. Reference-audio styles are
cached by the SHA-256 of the audio and its rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from tts_triton.core import audio
from tts_triton.core.config import LIMITS, STREAMING, ModelConfig, StreamingConfig
from tts_triton.core.contract import (
    CONTROLS,
    EMOTION,
    OUTPUT_SAMPLE_RATE,
    OUTPUT_SAMPLE_RATES,
    PITCH,
    REFERENCE_AUDIO,
    REFERENCE_SAMPLE_RATE,
    SPEED,
    TEXT,
    VOICE,
    VOLUME,
)
from tts_triton.core.voices import VoiceBank
from tts_triton.errors import InvalidInput
from tts_triton.serving.controls import Controls
from tts_triton.serving.pipeline import Chunk, InferBackend, Pipeline
from tts_triton.text import Sentence, check_text, plan_text, text_to_sequences
from tts_triton.text.language import check_english

MAX_TEXT_CHARS = LIMITS.max_text_chars
MIN_REFERENCE_SECONDS = LIMITS.min_reference_seconds
MAX_REFERENCE_SECONDS = LIMITS.max_reference_seconds
REFERENCE_RATES = LIMITS.reference_rates

__all__ = ["InvalidInput", "StyleCache", "SynthesisRequest", "TTSService", "output_rate", "parse_request"]


@dataclass
class SynthesisRequest:
    text: str
    voice: str | None = None
    emotion: str | None = None
    reference_audio: np.ndarray | None = None
    reference_sample_rate: int | None = None
    speed: float = 1.0
    pitch: float = 0.0
    volume: float = 0.0
    #: Whether the client asked for WORDS (word timestamps).
    words: bool = False

    @property
    def controls(self) -> Controls:
        return Controls(self.speed, self.pitch, self.volume)


def _string(name: str, value: np.ndarray | None) -> str | None:
    if value is None:
        return None
    if value.dtype != np.object_ or value.size != 1:
        raise InvalidInput(name, f"expected one BYTES element, got dtype {value.dtype} shape {list(value.shape)}")
    raw = value.reshape(-1)[0]
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError as err:
        raise InvalidInput(name, f"is not valid UTF-8 ({err.reason} at byte {err.start})") from None


def _control(name: str, value: np.ndarray | None) -> float:
    """The value of control input ``name`` (its neutral value when absent), within its contract range."""
    c = CONTROLS[name]
    if value is None:
        return c.neutral
    if value.size != 1 or value.dtype != np.float32:
        raise InvalidInput(name, f"expected one FP32 value, got dtype {value.dtype} shape {list(value.shape)}")
    x = float(value.reshape(-1)[0])
    if not math.isfinite(x) or not c.low <= x <= c.high:
        raise InvalidInput(name, f"{x:g} is outside {c.low:g}..{c.high:g} ({c.unit}; {c.neutral:g} is as trained)")
    return x


def parse_request(inputs: dict[str, np.ndarray | None], words: bool = False) -> SynthesisRequest:
    """Validate raw input tensors (by contract name; absent optional inputs are None); ``words``: whether
    WORDS is requested. TEXT is checked by the front end (:func:`~tts_triton.text.check_text`), the
    reference by :func:`check_reference`, the controls against :data:`~tts_triton.core.contract.CONTROLS`."""
    controls = {"speed": _control(SPEED, inputs.get(SPEED)), "pitch": _control(PITCH, inputs.get(PITCH)),
                "volume": _control(VOLUME, inputs.get(VOLUME)), "words": words}
    text = _string(TEXT, inputs.get(TEXT))
    if text is None:
        raise InvalidInput(TEXT, "is required")
    text = check_text(text, MAX_TEXT_CHARS)
    voice = _string(VOICE, inputs.get(VOICE)) or None
    emotion = _string(EMOTION, inputs.get(EMOTION)) or None
    ref, rate = inputs.get(REFERENCE_AUDIO), inputs.get(REFERENCE_SAMPLE_RATE)
    if ref is None:
        if rate is not None:
            raise InvalidInput(REFERENCE_SAMPLE_RATE, f"was given without {REFERENCE_AUDIO}")
        return SynthesisRequest(text, voice, emotion, **controls)
    if voice or emotion:
        raise InvalidInput(REFERENCE_AUDIO,
                           f"cannot be combined with {VOICE} or {EMOTION} (the reference sets the style)")
    samples, sample_rate = check_reference(ref, rate)
    return SynthesisRequest(text, reference_audio=samples, reference_sample_rate=sample_rate, **controls)


def output_rate(inputs: dict[str, np.ndarray | None]) -> int:
    """The sample rate (Hz) the client asked for with OUTPUT_SAMPLE_RATE, one of
    :data:`~tts_triton.core.contract.OUTPUT_SAMPLE_RATES`; the model's own when absent. Not part of
    :class:`SynthesisRequest`: the audio is resampled after the utterance cache, which keeps the model's rate."""
    value = inputs.get(OUTPUT_SAMPLE_RATE)
    if value is None:
        return audio.SAMPLE_RATE
    offered = ", ".join(map(str, OUTPUT_SAMPLE_RATES))
    if value.size != 1 or value.dtype != np.int32:
        raise InvalidInput(OUTPUT_SAMPLE_RATE, f"expected one INT32 value (Hz: {offered}), got dtype {value.dtype} "
                                               f"shape {list(value.shape)}")
    rate = int(value.reshape(-1)[0])
    if rate not in OUTPUT_SAMPLE_RATES:
        raise InvalidInput(OUTPUT_SAMPLE_RATE, f"{rate} Hz is not offered; one of {offered}")
    return rate


def check_reference(ref: np.ndarray, rate: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Reference samples (flat FP32) and their rate in Hz, within :data:`~tts_triton.core.config.LIMITS`;
    raises :class:`InvalidInput` naming REFERENCE_AUDIO or REFERENCE_SAMPLE_RATE otherwise."""
    if rate is None or rate.size != 1:
        raise InvalidInput(REFERENCE_SAMPLE_RATE, f"is required with {REFERENCE_AUDIO} (one INT32 value, in Hz)")
    sample_rate = int(rate.reshape(-1)[0])
    if not REFERENCE_RATES[0] <= sample_rate <= REFERENCE_RATES[1]:
        low, high = REFERENCE_RATES
        raise InvalidInput(REFERENCE_SAMPLE_RATE, f"{sample_rate} Hz is outside {low}-{high} Hz")
    if ref.dtype != np.float32:
        raise InvalidInput(REFERENCE_AUDIO, f"must be FP32 mono samples in [-1, 1], got {ref.dtype}")
    ref = ref.reshape(-1)
    seconds = ref.size / sample_rate
    if ref.size == 0:
        raise InvalidInput(REFERENCE_AUDIO, "is empty")
    if not np.isfinite(ref).all():
        raise InvalidInput(REFERENCE_AUDIO, "contains NaN or infinite samples")
    if seconds < MIN_REFERENCE_SECONDS or seconds > MAX_REFERENCE_SECONDS:
        raise InvalidInput(REFERENCE_AUDIO, f"is {seconds:.2f} s long; it must be {MIN_REFERENCE_SECONDS}-"
                                            f"{MAX_REFERENCE_SECONDS:.0f} s")
    if np.abs(ref).max() > 1.0 + 1e-3:
        raise InvalidInput(REFERENCE_AUDIO, "has samples outside [-1, 1]; send float audio, not int16 values")
    return ref, sample_rate


class StyleCache:
    """LRU cache of style vectors keyed by the SHA-256 of the reference audio and its rate; thread-safe."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(samples: np.ndarray, sample_rate: int) -> str:
        h = hashlib.sha256(np.ascontiguousarray(samples, dtype=np.float32).tobytes())
        h.update(str(sample_rate).encode())
        return h.hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
            return self._items.get(key)

    def put(self, key: str, style: np.ndarray) -> None:
        with self._lock:
            self._items[key] = style
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


#: Characters from which a request is prepared on the service's own thread, not on the event loop: a longer text's
#: plan would stall other streams' chunks (docs/records/bench/heavy-request-cpu.md), and shorter texts (most
#: requests) keep their first chunk free of the hand-over and of sharing the GIL with the loop.
PLAN_OFF_LOOP_CHARS = 1_000


def plan_request(text: str, max_tokens: int) -> list[Sentence]:
    """The front end's plan of a request's text. Raises InvalidInput for text in another language than English."""
    check_english(text)
    return plan_text(text, max_tokens)


@dataclass(frozen=True)
class Prepared:
    """A request made ready to decode: its sentences and either its style or the log-mel of its reference audio
    (with the style cache's key for the style the decoder will make of it)."""

    sentences: list[Sentence]
    style: np.ndarray | None
    ref_mel: np.ndarray | None = None
    key: str | None = None


class TTSService:
    """Validated request -> sentences + style -> streamed :class:`Chunk` objects.

    A request is prepared (:meth:`prepare`) on one thread of the service's own when its text is long
    (:data:`PLAN_OFF_LOOP_CHARS`) or it brings reference audio (resampled and turned into a mel), so that other
    requests on the event loop go on meanwhile (docs/records/bench/heavy-request-cpu.md); such requests wait for
    each other there, not for the network calls' threads.
    """

    def __init__(self, cfg: ModelConfig, voice_bank: VoiceBank, streaming: StreamingConfig = STREAMING,
                 style_cache: StyleCache | None = None) -> None:
        self.cfg = cfg
        self.voice_bank = voice_bank
        self.streaming = streaming
        self.style_cache = style_cache or StyleCache()
        self.preparer = ThreadPoolExecutor(1, thread_name_prefix="tts-prepare")

    def warm_up(self) -> None:
        """Run the front end once (loads espeak-ng and its voice data), so that the first request of a
        serving process does not pay for it."""
        text_to_sequences("Ready.", self.streaming.max_tokens)

    def prepare(self, request: SynthesisRequest) -> Prepared:
        """The request's plan and its style: the voice bank's, the style cache's or its reference audio's."""
        sentences = plan_request(request.text, self.streaming.max_tokens)
        if request.reference_audio is None:
            return Prepared(sentences, self.voice_bank.style(request.voice, request.emotion))
        key = StyleCache.key(request.reference_audio, request.reference_sample_rate)
        if (style := self.style_cache.get(key)) is not None:
            return Prepared(sentences, style)
        samples = audio.resample(request.reference_audio, request.reference_sample_rate)
        return Prepared(sentences, None, audio.mel_spectrogram(samples), key)

    async def stream(self, request: SynthesisRequest, backend: InferBackend,
                     cancelled: Callable[[], bool] = lambda: False) -> AsyncIterator[Chunk]:
        """Chunks of the request's audio, in order. Raises InvalidInput before the first chunk on bad input
        (a sentence's unknown ``voice`` included, and text in another language than English:
        :mod:`~tts_triton.text.language`)."""
        if len(request.text) < PLAN_OFF_LOOP_CHARS and request.reference_audio is None:
            ready = self.prepare(request)
        else:
            ready = await asyncio.get_running_loop().run_in_executor(self.preparer, self.prepare, request)
        styles = {s.voice: self.voice_bank.style(s.voice, request.emotion) for s in ready.sentences if s.voice}
        pipeline = Pipeline(backend, self.cfg, self.streaming)
        own = None if request.reference_audio is not None else request.voice  # a reference: the default's axis
        chunks = pipeline.stream(ready.sentences, ready.style, cancelled, ready.ref_mel, request.controls,
                                 styles.__getitem__, request.words,
                                 lambda semitones, voice: self.voice_bank.pitch_style(semitones, voice or own))
        key = ready.key
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                if key is not None:  # the reference's style is made by the first chunk
                    self.style_cache.put(key, pipeline.style)
                    key = None
                yield chunk
