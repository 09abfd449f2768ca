"""The text plan: what the decoder says, sentence by sentence, and which phonemes belong to which word.

    plan_text("Hello there. It costs $5!")  # two Sentences; words "Hello", "there" | "It", "costs", "five", ...

A spoken word points back into the request's TEXT (``start``/``end``) and into its sentence's ids
(``first``/``last``), so that word timings can be read off the decoder's alignment. Plain text and SSML
(a TEXT whose first element is ``<speak>``, see :mod:`tts_triton.text.ssml`) give the same structure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIRST_ELEMENT = re.compile(r"\ufeff?\s*<(?:\?xml|!|speak[\s/>])")


@dataclass(frozen=True)
class Word:
    """One spoken word: `text` as read aloud; [start, end) its character span in the request's TEXT
    (the source token for a reading, e.g. "03/14/2025" for each of its spoken words); its phonemes are
    ids[first:last] of its sentence."""
    text: str
    start: int
    end: int
    first: int
    last: int


@dataclass(frozen=True)
class Sentence:
    """One decoder input: phoneme ids and their words, with markup controls relative to the request's
    own (rate multiplies SPEED, pitch in semitones adds to PITCH, volume in dB adds to VOLUME), an optional
    preset voice overriding VOICE, and seconds of silence before and after it."""
    ids: list[int]
    words: list[Word]
    rate: float = 1.0
    pitch: float = 0.0
    volume: float = 0.0
    voice: str | None = None
    pause_before: float = 0.0
    pause_after: float = 0.0


def plan_text(text: str, max_tokens: int | None = None) -> list[Sentence]:
    """Plain text or SSML (first element <speak>) -> sentences; raises InvalidInput("TEXT", ...).

    With ``max_tokens`` no sentence has more ids than that (a longer one is cut as
    :func:`~tts_triton.text.frontend.text_to_sequences` cuts it; a word cut in two is in both pieces).
    """
    from tts_triton.text import frontend  # it builds on this module's dataclasses

    if is_ssml(text):
        try:
            from tts_triton.text import ssml  # it needs defusedxml: plain text does without
        except ImportError as e:
            raise RuntimeError(f"SSML needs the defusedxml package (pip install defusedxml): {e}") from e
        return ssml.plan_ssml(frontend.check_text(text), max_tokens)
    return frontend.plan_plain(text, max_tokens)


def is_ssml(text: str) -> bool:
    """Whether TEXT is markup: its first element is ``<speak>`` (after an optional byte-order mark and XML
    declaration; a DTD or comment there makes it markup too, which the parser then refuses or skips)."""
    return isinstance(text, str) and _FIRST_ELEMENT.match(text) is not None
