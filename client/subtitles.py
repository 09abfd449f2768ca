"""Subtitles from word timestamps: SubRip (``.srt``) and WebVTT (``.vtt``) cues, and the words as JSON.

Consecutive words form one cue until it holds :data:`MAX_CUE_WORDS` words, would last over
:data:`MAX_CUE_SECONDS`, or a silence of :data:`CUE_GAP_SECONDS` or more comes before the next word.
A cue runs from its first word's start to its last word's end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from .results import Word

__all__ = ["cues", "to_srt", "to_vtt", "words_to_json"]

MAX_CUE_WORDS = 8
MAX_CUE_SECONDS = 4.0
CUE_GAP_SECONDS = 0.4


def cues(words: Sequence[Word]) -> list[tuple[float, float, str]]:
    """(start, end, text) of each cue, in order."""
    groups: list[list[Word]] = []
    for w in words:
        if groups:
            g = groups[-1]
            fits = len(g) < MAX_CUE_WORDS and w.end - g[0].start <= MAX_CUE_SECONDS
            if fits and w.start - g[-1].end < CUE_GAP_SECONDS:
                g.append(w)
                continue
        groups.append([w])
    return [(g[0].start, g[-1].end, " ".join(w.word for w in g)) for g in groups]


def _clock(seconds: float, separator: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{separator}{ms:03d}"


def to_srt(words: Sequence[Word]) -> str:
    """SubRip text: numbered cues, ``HH:MM:SS,mmm --> HH:MM:SS,mmm``."""
    return "".join(f"{i}\n{_clock(a, ',')} --> {_clock(b, ',')}\n{text}\n\n"
                   for i, (a, b, text) in enumerate(cues(words), 1))


def to_vtt(words: Sequence[Word]) -> str:
    """WebVTT text: a ``WEBVTT`` header, then cues ``HH:MM:SS.mmm --> HH:MM:SS.mmm``."""
    return "WEBVTT\n\n" + "".join(f"{_clock(a, '.')} --> {_clock(b, '.')}\n{text}\n\n" for a, b, text in cues(words))


def words_to_json(words: Sequence[Word]) -> str:
    """The words as a JSON list of objects (the fields of :class:`Word`)."""
    return json.dumps([asdict(w) for w in words], ensure_ascii=False, indent=1)
