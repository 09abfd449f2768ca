"""Request tensors and response parsing, protocol-independent and checked against the contract.

:func:`build_request` turns keyword arguments into the input tensors of ``tts`` / ``tts_offline``
(:func:`tts_triton.core.contract.tts_spec`); :class:`TTSRequest` then makes tritonclient's
``InferInput`` / ``InferRequestedOutput`` objects for whichever tritonclient module is used.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypedDict, Unpack

import numpy as np

from tts_triton.core.contract import (
    AUDIO,
    CACHE_SCOPE_PARAMETER,
    CONTROLS,
    EMOTION,
    MEL,
    OUTPUT_SAMPLE_RATE,
    OUTPUT_SAMPLE_RATES,
    REFERENCE_AUDIO,
    REFERENCE_SAMPLE_RATE,
    SAMPLE_RATE,
    STOP_PARAMETER,
    TEXT,
    TTS_INPUTS,
    VOICE,
    WORDS,
    TensorSpec,
)

from .audio_io import ReferenceAudio, load_reference_audio
from .errors import InvalidInputError, TTSError
from .results import AudioChunk, Word

__all__ = ["RequestOptions", "TTSRequest", "build_request", "build_stop", "chunk_from_result", "is_final_response",
           "new_request_id"]

#: The inputs of ``tts`` / ``tts_offline`` by name (the outputs are read by name from the response).
INPUTS: dict[str, TensorSpec] = {t.name: t for t in TTS_INPUTS}
#: Parameter Triton sets on each streamed response when the request enables empty final responses.
FINAL_RESPONSE_PARAMETER = "triton_final_response"


class RequestOptions(TypedDict, total=False):
    """The keyword arguments of every method that sends a request (``stream``, ``synthesize``; gRPC,
    asyncio and HTTP alike). All are optional; left out, the server's defaults apply.

    ``voice`` / ``emotion``: a preset of the server's voice bank. ``reference_audio`` (with
    ``reference_sample_rate`` unless it is a file): audio whose style to copy instead of a preset.
    ``timeout``: seconds for this request, overriding the client's. ``return_mel``: ask for MEL too.
    ``speed`` (0.5-2, 1 as trained), ``pitch`` (semitones, -12..12), ``volume`` (dB, -30..12): speech
    controls, None for as trained. ``ssml``: True when ``text`` is SSML (wrapped in ``<speak>`` if it does
    not start with it), or the SSML markup itself (``text`` then empty). ``return_words``: ask for WORDS,
    each chunk's word timestamps (:attr:`AudioChunk.words`). ``sample_rate``: the audio's rate in Hz, one of
    :data:`~tts_triton.core.contract.OUTPUT_SAMPLE_RATES` (OUTPUT_SAMPLE_RATE; None: the model's own, 22050).
    ``cache_scope``: whose utterance-cache entries the request reads and writes (None: the shared ones).
    """

    voice: str | None
    emotion: str | None
    reference_audio: ReferenceAudio | None
    reference_sample_rate: int | None
    timeout: float | None
    return_mel: bool
    speed: float | None
    pitch: float | None
    volume: float | None
    ssml: bool | str | None
    return_words: bool
    sample_rate: int | None
    cache_scope: str | None


@dataclass(frozen=True)
class TTSRequest:
    """Validated input tensors (``name -> array`` in the contract's dtype and shape), the outputs to
    ask for, the request's own timeout (None: the client's) and request parameters."""

    tensors: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    timeout: float | None = None
    parameters: dict[str, str] | None = None

    def infer_inputs(self, tritonclient_module: ModuleType) -> list[Any]:
        """``InferInput`` objects of ``tritonclient.grpc``, ``tritonclient.grpc.aio`` or ``tritonclient.http``."""
        inputs = []
        for name, array in self.tensors.items():
            infer_input = tritonclient_module.InferInput(name, list(array.shape), INPUTS[name].wire_dtype)
            infer_input.set_data_from_numpy(array)
            inputs.append(infer_input)
        return inputs

    def requested_outputs(self, tritonclient_module: ModuleType) -> list[Any]:
        """``InferRequestedOutput`` objects for :attr:`outputs`."""
        return [tritonclient_module.InferRequestedOutput(name) for name in self.outputs]

    def chunk(self, result: InferResultLike, *, index: int, elapsed: float) -> AudioChunk | None:
        """:func:`chunk_from_result` with the outputs this request asked for."""
        return chunk_from_result(result, index=index, elapsed=elapsed, return_mel=self.return_mel,
                                 return_words=self.return_words)

    @property
    def return_mel(self) -> bool:
        return MEL in self.outputs

    @property
    def return_words(self) -> bool:
        return WORDS in self.outputs


def build_request(text: str, **options: Unpack[RequestOptions]) -> TTSRequest:
    """Build one request from ``text`` and :class:`RequestOptions`; optional inputs left as None are
    not sent (the server then uses its defaults). Raises ``TypeError`` for an unknown option and
    :class:`InvalidInputError` naming the input for arguments that cannot be encoded; what the
    server accepts (known voices, non-empty text...) it checks itself."""
    unknown = options.keys() - RequestOptions.__optional_keys__
    if unknown:
        raise TypeError(f"unknown request option(s): {', '.join(sorted(unknown))}")
    tensors = {TEXT: _string(TEXT, _ssml_text(text, options.get("ssml")))}
    for name, value in ((VOICE, options.get("voice")), (EMOTION, options.get("emotion"))):
        if value is not None:
            tensors[name] = _string(name, value)
    reference, rate = options.get("reference_audio"), options.get("reference_sample_rate")
    if reference is not None:
        samples, rate = load_reference_audio(reference, rate)
        tensors[REFERENCE_AUDIO] = samples
        tensors[REFERENCE_SAMPLE_RATE] = np.array([rate], dtype=np.int32)
    elif rate is not None:
        raise InvalidInputError(f"{REFERENCE_SAMPLE_RATE}: given without {REFERENCE_AUDIO}")
    for name in CONTROLS:
        value = options.get(name.lower())  # type: ignore[misc]
        if value is not None:
            tensors[name] = _control(name, value)
    if (rate := options.get("sample_rate")) is not None:
        if isinstance(rate, bool) or rate not in OUTPUT_SAMPLE_RATES:
            raise InvalidInputError(f"{OUTPUT_SAMPLE_RATE}: expected one of "
                                    f"{', '.join(map(str, OUTPUT_SAMPLE_RATES))} (Hz), got {rate!r}")
        tensors[OUTPUT_SAMPLE_RATE] = np.array([rate], dtype=np.int32)
    outputs = (AUDIO, SAMPLE_RATE, *((MEL,) if options.get("return_mel") else ()),
               *((WORDS,) if options.get("return_words") else ()))
    scope = options.get("cache_scope")
    return TTSRequest(tensors, outputs, options.get("timeout"),
                      None if scope is None else {CACHE_SCOPE_PARAMETER: scope})


def build_stop(request_id: str) -> TTSRequest:
    """The in-band stop of the ``tts`` stream sent with ``request_id``: sent to ``tts`` (on the same gRPC stream
    or another), it makes the server end that stream at its next decoder call with a normal FINAL, and answers
    with a FINAL of its own. Ending a stream this way avoids a gRPC cancel (which can crash Triton 2.51)."""
    return TTSRequest({TEXT: _string(TEXT, "")}, (), parameters={STOP_PARAMETER: request_id})


def new_request_id() -> str:
    """A request id that an in-band stop can name."""
    return uuid.uuid4().hex


def _ssml_text(text: str, ssml: bool | str | None) -> str:
    """TEXT for ``text`` and the ``ssml`` option (see :class:`RequestOptions`)."""
    if isinstance(ssml, str):
        if text:
            raise InvalidInputError("TEXT: give the markup either as text (with ssml=True) or as ssml=, not both")
        return ssml
    if ssml and isinstance(text, str) and not text.lstrip().startswith("<speak"):
        return f"<speak>{text}</speak>"
    return text


def _control(name: str, value: float) -> np.ndarray:
    """One FP32 control value, checked against its range (the server checks it too)."""
    c = CONTROLS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not c.low <= value <= c.high:
        raise InvalidInputError(f"{name}: expected a number in {c.low:g}..{c.high:g} ({c.unit}), got {value!r}")
    return np.array([value], dtype=np.float32)


def _string(name: str, value: str) -> np.ndarray:
    if not isinstance(value, str):
        raise InvalidInputError(f"{name}: expected str, got {type(value).__name__}")
    return np.array([value.encode("utf-8")], dtype=np.object_)


class InferResultLike(Protocol):
    """What is read from a tritonclient ``InferResult``."""

    def as_numpy(self, name: str) -> np.ndarray | None: ...


def chunk_from_result(result: InferResultLike, *, index: int, elapsed: float, return_mel: bool,
                      return_words: bool = False) -> AudioChunk | None:
    """The chunk a response carries; None for one with neither audio samples, mel frames nor words
    (Triton's empty final response). Raises :class:`TTSError` if audio comes without SAMPLE_RATE."""
    audio = result.as_numpy(AUDIO)
    mel = result.as_numpy(MEL) if return_mel else None
    raw_words = result.as_numpy(WORDS) if return_words else None
    words = Word.parse(raw_words.reshape(-1)[0]) if raw_words is not None and raw_words.size else ()
    if (audio is None or audio.size == 0) and (mel is None or mel.size == 0) and not words:
        return None
    rate = result.as_numpy(SAMPLE_RATE)
    if rate is None:
        raise TTSError(f"the server sent a response without {SAMPLE_RATE}")
    return AudioChunk(
        # Copies: tritonclient's arrays are read-only views of the response buffer.
        audio=np.zeros(0, np.float32) if audio is None else np.array(audio, dtype=np.float32).reshape(-1),
        sample_rate=int(rate.reshape(-1)[0]),
        index=index,
        elapsed=elapsed,
        mel=None if mel is None else np.array(mel, dtype=np.float32),
        words=words,
    )


def is_final_response(result: Any) -> bool:
    """True for the response Triton flags as the last of a streamed request (``tritonclient.grpc``)."""
    parameters = result.get_response().parameters
    return FINAL_RESPONSE_PARAMETER in parameters and parameters[FINAL_RESPONSE_PARAMETER].bool_param
