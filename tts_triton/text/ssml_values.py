"""Attribute values of SSML's ``break``, ``prosody`` and ``emphasis``, as seconds, rate factors,
semitones and decibels. A value this subset does not read raises InvalidInput("TEXT", ...) naming the
element, the attribute and the value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from tts_triton.errors import InvalidInput

#: <break strength>: seconds of silence (SSML's default for a bare <break/> is "medium").
BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.2, "medium": 0.4, "strong": 0.7, "x-strong": 1.2}
MAX_BREAK_S = 10.0
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
PITCHES = {"x-low": -6.0, "low": -3.0, "medium": 0.0, "default": 0.0, "high": 3.0, "x-high": 6.0}
VOLUMES = {"silent": -60.0, "x-soft": -12.0, "soft": -6.0, "medium": 0.0, "default": 0.0, "loud": 6.0, "x-loud": 10.0}
#: <emphasis level> -> (rate factor, semitones, dB): stressed words slower, higher and louder.
EMPHASIS = {"strong": (0.85, 2.0, 4.0), "moderate": (0.92, 1.0, 2.0), "reduced": (1.08, -1.0, -3.0),
            "none": (1.0, 0.0, 0.0)}
#: What markup may ask for, product of all nested elements (the request's own controls come on top).
RATE_RANGE, PITCH_RANGE, VOLUME_RANGE = (0.25, 4.0), (-24.0, 24.0), (-60.0, 24.0)

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
#: A number and whether it was signed -> the value, or None when it is out of bounds.
_Unit = Callable[[float, bool], float | None]


def _bad(element: str, attribute: str, value: str, expected: str) -> InvalidInput:
    return InvalidInput("TEXT", f"<{element} {attribute}={value!r}>: expected {expected}")


def break_seconds(time: str | None, strength: str | None) -> float:
    """Seconds of a <break>: ``time`` ("500ms", "1.5s") wins over ``strength``; "medium" if neither."""
    if time is not None:
        match = re.fullmatch(rf"\s*({_NUMBER})\s*(ms|s)\s*", time)
        seconds = float(match[1]) / (1000 if match[2] == "ms" else 1) if match else -1.0
        if not 0 <= seconds <= MAX_BREAK_S:
            raise _bad("break", "time", time, f"a time such as 500ms or 1.5s, at most {MAX_BREAK_S:g}s")
        return seconds
    if strength is None:
        return BREAK_STRENGTHS["medium"]
    if strength not in BREAK_STRENGTHS:
        raise _bad("break", "strength", strength, " or ".join(BREAK_STRENGTHS))
    return BREAK_STRENGTHS[strength]


def _read(attribute: str, value: str, names: dict[str, float], units: dict[str, _Unit], expected: str) -> float:
    """A <prosody> value: one of ``names``, or a number with one of ``units`` (a function of the number and
    whether it was signed, giving the value or None when out of bounds)."""
    value = value.strip()
    if value in names:
        return names[value]
    match = re.fullmatch(rf"({_NUMBER})\s*({'|'.join(units)})", value)
    result = units[match[2]](float(match[1]), match[1][0] in "+-") if match else None
    if result is None:
        raise _bad("prosody", attribute, value, f"{', '.join(names)}, {expected}")
    return result


def rate_factor(value: str) -> float:
    """<prosody rate>: a name, "150%" (of the current rate), "+10%" / "-10%" (relative) or a factor "1.2"."""
    return _read("rate", value, RATES, {
        "%": lambda n, signed: _positive(1 + n / 100 if signed else n / 100),
        "": lambda n, signed: _positive(n),
    }, "a percentage such as 80% or +10%, or a factor")


def pitch_semitones(value: str) -> float:
    """<prosody pitch>: a name, "+2st" / "-3st", or "+10%" / "-10%" (of the frequency, as semitones)."""
    return _read("pitch", value, PITCHES, {
        "st": lambda n, signed: n,
        "%": lambda n, signed: 12 * math.log2(1 + n / 100) if n > -100 else None,
    }, "semitones such as +2st, or a change such as +10% (absolute Hz are not supported: voices differ)")


def volume_db(value: str) -> float:
    """<prosody volume>: a name or decibels "+6dB" / "-3dB"."""
    return _read("volume", value, VOLUMES, {"dB": lambda n, signed: n}, "or decibels such as -6dB")


def _positive(factor: float) -> float | None:
    return factor if factor > 0 else None


def emphasis(level: str | None) -> tuple[float, float, float]:
    """<emphasis level> (default "moderate") as (rate factor, semitones, dB)."""
    level = "moderate" if level is None else level
    if level not in EMPHASIS:
        raise _bad("emphasis", "level", level, " or ".join(EMPHASIS))
    return EMPHASIS[level]


def check_range(element: str, name: str, value: float, bounds: tuple[float, float]) -> float:
    """``value`` if within ``bounds``; InvalidInput naming the element otherwise."""
    if not (math.isfinite(value) and bounds[0] <= value <= bounds[1]):
        raise InvalidInput("TEXT", f"<{element}>: the markup's combined {name} {value:g} is outside "
                                   f"{bounds[0]:g}..{bounds[1]:g}")
    return value
