"""The request body of ``POST /v1/audio/speech`` (OpenAI's), parsed and checked field by field.

Every problem is an :class:`ApiError` naming the field: 400 for a missing, mistyped or out-of-range field,
413 for an ``input`` over the gateway's limit. ``null`` in an optional field means its default, as in OpenAI's
SDKs. A field OpenAI's body does not have is ignored and named in :attr:`SpeechRequest.ignored` (the app logs
it), so clients that add their own fields keep working.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .encoders import FORMATS, available_formats
from .errors import ApiError

__all__ = ["FIELDS", "MODELS", "OPENAI_SPEED_RANGE", "STREAM_FORMATS", "SpeechRequest", "lone_surrogate",
           "parse_speech_request"]

#: The ``speed`` range OpenAI's API accepts.
OPENAI_SPEED_RANGE = (0.25, 4.0)
STREAM_FORMATS = ("audio", "sse")
#: OpenAI's documented body of ``POST /v1/audio/speech``.
FIELDS = ("model", "input", "voice", "instructions", "response_format", "speed", "stream_format")
#: The model names listed by ``GET /v1/models`` (OpenAI's speech models); ``model`` may be any name: there is one.
MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


@dataclass(frozen=True)
class SpeechRequest:
    """One checked request; ``voice`` is the name as sent (an object's ``id`` for ``{"id": ...}``)."""

    model: str
    input: str
    voice: str
    response_format: str = "mp3"
    speed: float = 1.0
    instructions: str | None = None
    stream_format: str = "audio"
    #: Fields of the body that OpenAI's does not have, ignored.
    ignored: tuple[str, ...] = ()


def parse_speech_request(body: bytes, *, max_input_chars: int) -> SpeechRequest:
    """Parse and check a JSON body; raises :class:`ApiError` (400 or 413) naming the field at fault: never an
    internal error, whatever the bytes (JSON nested past the parser's depth, lone surrogates included)."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(400, f"the request body is not valid JSON: {e}") from None
    except RecursionError:
        raise ApiError(400, "the request body is not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if (where := lone_surrogate(data)) is not None:
        field = where.split(".")[0].split("[")[0]
        raise ApiError(400, f"{where}: not valid Unicode (a lone surrogate)", param=field if field in FIELDS else None)
    if data.get("input") == "":
        raise ApiError(400, "input: must contain text to speak, got an empty string", param="input")
    text = _string(data, "input", required=True)
    if not text.strip():
        raise ApiError(400, "input: must contain text to speak", param="input")
    if len(text) > max_input_chars:
        raise ApiError(413, f"input: {len(text)} characters; the limit is {max_input_chars}", param="input",
                       code="input_too_long")
    voice = data.get("voice")
    if isinstance(voice, dict) and set(voice) == {"id"}:
        voice = voice["id"]
    if not isinstance(voice, str) or not voice:
        raise ApiError(400, "voice: required, a voice name (GET /v1/audio/voices lists them)", param="voice")
    response_format = _choice(data, "response_format", tuple(FORMATS), "mp3")
    if response_format not in (served := available_formats()):
        raise ApiError(400, f"response_format: {response_format!r} needs PyAV (FFmpeg), which this gateway's "
                            f"environment lacks; it serves {', '.join(served)}", param="response_format")
    return SpeechRequest(
        model=_string(data, "model", required=True),
        input=text,
        voice=voice,
        response_format=response_format,
        speed=_speed(data.get("speed")),
        instructions=_string(data, "instructions", required=False) or None,
        stream_format=_choice(data, "stream_format", STREAM_FORMATS, "audio"),
        ignored=tuple(sorted(data.keys() - set(FIELDS))),
    )


def lone_surrogate(value: Any) -> str | None:
    """The path of the first string (key or value) of parsed JSON that holds a lone surrogate (JSON's ``\\ud800``
    escapes decode to one, which cannot be encoded to UTF-8), or None. Iterative: any depth JSON parses to."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where or "the body"
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                shown = key.encode("utf-8", "backslashreplace").decode()[:40]  # a path that can be printed
                name = f"{where}.{shown}" if where else shown
                stack += [(name, child), (name, key)]
        elif isinstance(item, list):
            stack += [(f"{where}[{i}]", child) for i, child in reversed(list(enumerate(item)))]
    return None


def _string(data: dict[str, Any], name: str, *, required: bool) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ApiError(400, f"{name}: {'required, ' if required else ''}expected a string, got {value!r:.40}",
                       param=name)
    return value


def _choice(data: dict[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = data.get(name)
    if value is None:
        return default
    if value not in choices:
        raise ApiError(400, f"{name}: {value!r:.40} is not one of {', '.join(choices)}", param=name)
    return value


def _speed(value: Any) -> float:
    if value is None:
        return 1.0
    low, high = OPENAI_SPEED_RANGE
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ApiError(400, f"speed: expected a number, got {value!r:.40}", param="speed")
    if not low <= value <= high:
        raise ApiError(400, f"speed: {value} is outside {low}-{high}", param="speed")
    return float(value)
