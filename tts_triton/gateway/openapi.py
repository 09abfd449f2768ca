"""``GET /openapi.json``: the gateway's HTTP API as an OpenAPI 3.1 document, built from the same definitions the
handlers use (the body's fields and ranges, the formats, the limits of this gateway's config, the voices of the
server's voice bank when Triton can say), so that the document and the implementation cannot drift apart; the
tests fuzz the real gateway against it (schemathesis). What it cannot say: which texts have something to speak
(a text of punctuation alone is a 400 naming ``input``). The WebSocket route is not described (OpenAPI has no
WebSocket operations).
"""

from __future__ import annotations

from typing import Any

from tts_triton import __version__

from .config import GatewayConfig
from .encoders import FORMATS, available_formats
from .schema import MODELS, OPENAI_SPEED_RANGE, STREAM_FORMATS
from .voice_map import OPENAI_VOICES

__all__ = ["openapi_document"]

_ERROR = {"$ref": "#/components/schemas/Error"}
_JSON_ERROR = {"application/json": {"schema": _ERROR}}
_WHY = {400: "A field is missing, mistyped or out of range (``param`` names it), or the body is not JSON.",
        401: "No API key, or an unknown one.", 408: "The request body did not arrive in time.",
        413: "``input`` or the body is over the gateway's limit.",
        429: "The gateway is at its limit of concurrent streams (``Retry-After``).",
        500: "Synthesis failed.", 503: "Triton is unreachable or busy, or the gateway is at its connection limit.",
        504: "Synthesis timed out."}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): {"description": _WHY[s], "content": _JSON_ERROR} for s in statuses}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _speech_request(max_input_chars: int, voices: list[str] | None) -> dict[str, Any]:
    low, high = OPENAI_SPEED_RANGE
    name = {"type": "string", "minLength": 1, "examples": sorted(OPENAI_VOICES)} if voices is None else {"enum": voices}
    return {
        "type": "object",
        "required": ["model", "input", "voice"],
        "additionalProperties": True,
        "description": "OpenAI's body. Fields beside these are ignored (and logged); null means the default.",
        "properties": {
            "model": {"type": "string", "minLength": 1, "examples": list(MODELS),
                      "description": "Any name: there is one model."},
            "input": {"type": "string", "minLength": 1, "maxLength": max_input_chars, "pattern": r"\S",
                      "description": "The text to speak (not only white space)."},
            "voice": {"oneOf": [
                name,
                {"type": "object", "required": ["id"], "additionalProperties": False, "properties": {"id": name}},
            ], "description": "A server voice, or an OpenAI voice name mapped to one (GET /v1/audio/voices)."},
            "instructions": {"type": ["string", "null"],
                             "description": "Phrases mapped to emotion, rate, pitch and volume."},
            "response_format": {"enum": [*available_formats(), None], "default": "mp3"},
            "speed": {"type": ["number", "null"], "minimum": low, "maximum": high, "default": 1.0},
            "stream_format": {"enum": [*STREAM_FORMATS, None], "default": "audio"},
        },
    }


def openapi_document(config: GatewayConfig, voices: list[str] | None = None) -> dict[str, Any]:
    """The OpenAPI document of a gateway serving ``config``; ``voice`` names one of ``voices`` (None: any name)."""
    audio = {FORMATS[f].media_type: {"schema": {"type": "string", "format": "binary"}} for f in available_formats()}
    # Each event of the SSE stream: a JSON object (speech.audio.delta, speech.audio.done or error) as its data.
    audio["text/event-stream"] = {"schema": {"type": "object", "required": ["data"], "properties": {
        "data": {"type": "string", "contentMediaType": "application/json"}}}}
    keyed = {"security": [{"bearer": []}]} if config.api_keys else {}
    auth_errors = (401,) if config.api_keys else ()
    listing = {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": {"type": "object", "required": ["id", "object", "created", "owned_by"],
                                            "properties": {"id": {"type": "string"}, "object": {"const": "model"},
                                                           "created": {"type": "integer"},
                                                           "owned_by": {"type": "string"}}}}}}
    status = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "tts-triton gateway", "version": __version__,
                 "description": "OpenAI's speech API in front of Triton's streaming tts model."},
        "paths": {
            "/v1/audio/speech": {"post": {
                "operationId": "createSpeech", **keyed,
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SpeechRequest"}}}},
                "responses": {"200": {"description": "The audio, streamed as it is synthesized (or SSE events).",
                                      "content": audio},
                              **_errors(400, *auth_errors, 408, 413, 429, 500, 503, 504)}}},
            "/v1/audio/voices": {"get": {
                "operationId": "listVoices", **keyed,
                "responses": {"200": _json({"type": "object", "required": ["voices", "openai_voices", "emotions"]},
                                           "The server's voices, OpenAI's names mapped to them, the emotions."),
                              **_errors(*auth_errors, 503)}}},
            "/v1/models": {"get": {"operationId": "listModels", **keyed,
                                   "responses": {"200": _json(listing, "The model names."),
                                                 **_errors(*auth_errors)}}},
            "/v1/audio/models": {"get": {"operationId": "listAudioModels", **keyed,
                                         "responses": {"200": _json(listing, "The model names (also under "
                                                                             "``models``)."),
                                                       **_errors(*auth_errors)}}},
            "/healthz": {"get": {"operationId": "health",
                                 "responses": {"200": _json(status, "The process is up.")}}},
            "/readyz": {"get": {"operationId": "ready",
                                "responses": {"200": _json(status, "Triton and its tts model are ready."),
                                              **_errors(503)}}},
            "/metrics": {"get": {"operationId": "metrics", "responses": {"200": {
                "description": "Prometheus metrics.", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"operationId": "openapi", "responses": {"200": _json(
                {"type": "object"}, "This document.")}}},
        },
        "components": {
            "schemas": {
                "SpeechRequest": _speech_request(config.max_input_chars, voices),
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["message", "type", "param", "code"],
                    "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                                   "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}},
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
