"""Bad input, typed where it is found.

The front end (TEXT), the voice bank (VOICE, EMOTION) and the request parser (REFERENCE_AUDIO,
REFERENCE_SAMPLE_RATE) raise :class:`InvalidInput` naming the input; the BLS answers any of them
with INVALID_ARG and this message, unparsed.
"""

from __future__ import annotations

__all__ = ["InvalidInput"]


class InvalidInput(ValueError):
    """A request input is missing or malformed: ``input_name`` names it, ``reason`` says why,
    and ``str(err)`` is ``"<input_name>: <reason>"``."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.input_name = name
        self.reason = reason
