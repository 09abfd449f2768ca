"""The messages of ElevenLabs' input-streaming sockets: what ends a session with an error, and the checks on
what a client sends (JSON objects; unknown fields are ignored)."""

from __future__ import annotations

import json
from typing import Any

from tts_triton.core.contract import CONTROLS, SPEED
from tts_triton.text.incremental import DEFAULT_SCHEDULE

from .schema import lone_surrogate

__all__ = ["CLOSE_ERROR", "CLOSE_LATER", "CLOSE_OK", "CLOSE_POLICY", "CLOSE_TOO_BIG", "MAX_INACTIVITY_TIMEOUT_S",
           "SessionError", "describe", "optional_str", "parse_message", "schedule", "speed"]

#: WebSocket close codes (RFC 6455): normal, policy violation, message too big, internal error, try again later.
CLOSE_OK, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_ERROR, CLOSE_LATER = 1000, 1008, 1009, 1011, 1013
#: ElevenLabs' bounds of ``inactivity_timeout`` (seconds).
MAX_INACTIVITY_TIMEOUT_S = 180
#: The bounds ElevenLabs puts on each ``chunk_length_schedule`` entry; the last value repeats.
SCHEDULE_RANGE = (5, 500)


class SessionError(Exception):
    """Ends a session with an error message and a close ``code``."""

    def __init__(self, code: int, error: str, message: str) -> None:
        super().__init__(message)
        self.code, self.error, self.message = code, error, message


def parse_message(raw: str | bytes | None) -> dict[str, Any]:
    """A client message as a JSON object of valid Unicode; a :class:`SessionError` (1008) naming the problem for
    anything else (not JSON, nested past the parser's depth, a lone surrogate such as ``"\\ud800"``)."""
    try:
        message = json.loads(raw) if raw is not None else None
    except (ValueError, UnicodeDecodeError) as e:
        raise SessionError(CLOSE_POLICY, "invalid_message", f"a message is not JSON: {e}") from None
    except RecursionError:
        raise SessionError(CLOSE_POLICY, "invalid_message", "a message is nested too deeply") from None
    if not isinstance(message, dict):
        raise SessionError(CLOSE_POLICY, "invalid_message", f"a message must be a JSON object, got "
                                                            f"{describe(message)}")
    if (where := lone_surrogate(message)) is not None:
        raise SessionError(CLOSE_POLICY, "invalid_message", f"{where}: not valid Unicode (a lone surrogate)")
    return message


def describe(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"


def optional_str(message: dict[str, Any], name: str) -> str | None:
    value = message.get(name)
    if value is not None and not isinstance(value, str):
        raise SessionError(CLOSE_POLICY, "invalid_message", f"{name}: expected a string, got {describe(value)}")
    return value


def speed(message: dict[str, Any]) -> float | None:
    """``voice_settings.speed`` within the model's range (None: as trained); other settings are ignored."""
    settings = message.get("voice_settings")
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise SessionError(CLOSE_POLICY, "invalid_message",
                           f"voice_settings: expected an object, got {describe(settings)}")
    speed, control = settings.get("speed"), CONTROLS[SPEED]
    if speed is None:
        return None
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not control.low <= speed <= control.high:
        raise SessionError(CLOSE_POLICY, "invalid_message", f"voice_settings.speed: expected a number in "
                                                            f"{control.low:g}-{control.high:g}, got {describe(speed)}")
    return None if speed == control.neutral else float(speed)


def schedule(message: dict[str, Any]) -> tuple[int, ...]:
    config = message.get("generation_config")
    schedule = config.get("chunk_length_schedule") if isinstance(config, dict) else None
    if schedule is None:
        return DEFAULT_SCHEDULE
    low, high = SCHEDULE_RANGE
    if not isinstance(schedule, list) or not schedule or not all(
            isinstance(n, int) and not isinstance(n, bool) and low <= n <= high for n in schedule):
        raise SessionError(CLOSE_POLICY, "invalid_message", f"generation_config.chunk_length_schedule: expected a "
                                                            f"list of {low}-{high}, got {describe(schedule)}")
    return tuple(schedule)
