"""The text plan's parts: what the decoder says, sentence by sentence (:class:`Sentence`), and which phonemes belong
to which word (:class:`Word`); :func:`~tts_triton.text.planner.plan_text` makes the plan.

A spoken word points back into the request's TEXT (``start``/``end``) and into its sentence's ids
(``first``/``last``), so that word timings can be read off the decoder's alignment. Plain text and SSML
(a TEXT whose first element is ``<speak>``, see :mod:`tts_triton.text.ssml`) give the same structure.
"""

from __future__ import annotations

from dataclasses import dataclass


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
