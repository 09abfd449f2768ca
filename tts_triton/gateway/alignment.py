"""The server's word timestamps as ElevenLabs' character alignment, block by block.

Audio leaves as soon as it comes; the server reports each word with the chunk that completes it, often a
chunk or two after the word's audio. So each audio message carries the alignment of the words completed with
its chunk: ``alignment`` for the piece's characters up to the last such word (characters between words,
spaces and punctuation, fill the silence between them), ``normalizedAlignment`` for the words as spoken
(``$5`` -> "five dollars "). Times are milliseconds from the end of the previous block (the first block of
a stream: from the start of its audio), so that a client adding each block's last ``start + duration`` to a
running clock (Pipecat does) keeps the stream's clock: a piece's last block runs to the end of its audio.
Every character of the piece's source is in exactly one block, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tts_triton.client import Word

__all__ = ["AlignedAudio", "PieceAligner"]

@dataclass
class AlignedAudio:
    """One message's audio (model rate) and its ``alignment`` / ``normalizedAlignment`` (None: no characters)."""

    audio: np.ndarray
    alignment: dict[str, list[Any]] | None = None
    normalized: dict[str, list[Any]] | None = None

    def then(self, later: AlignedAudio) -> AlignedAudio:
        """This message and ``later`` as one (``later``'s times shifted by this block's extent)."""
        shift = _extent(self.alignment)
        return AlignedAudio(np.concatenate([self.audio, later.audio]), _joined(self.alignment, later.alignment, shift),
                            _joined(self.normalized, later.normalized, shift))


@dataclass
class _Timeline:
    chars: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    durations: list[int] = field(default_factory=list)

    def add(self, text: str, start_s: float, end_s: float, origin_s: float) -> None:
        """``text`` spread evenly over ``[start_s, end_s]``, in ms from ``origin_s``."""
        if not text:
            return
        step = max(end_s - start_s, 0.0) / len(text)
        for i, ch in enumerate(text):
            begin = round((start_s + i * step - origin_s) * 1000)
            end = round((start_s + (i + 1) * step - origin_s) * 1000)
            self.chars.append(ch)
            self.starts.append(max(begin, 0))
            self.durations.append(max(end - max(begin, 0), 0))

    def body(self) -> dict[str, list[Any]] | None:
        return {"chars": self.chars, "charStartTimesMs": self.starts, "charDurationsMs": self.durations} \
            if self.chars else None


class PieceAligner:
    """One piece's audio chunks as messages with alignment blocks. ``source``: the piece's characters;
    ``offset``: where they start in the text the server was sent (word spans index that text)."""

    def __init__(self, source: str, offset: int) -> None:
        self.source, self.offset = source, offset
        self._audio_s = 0.0  # seconds of the piece's audio so far
        self._cursor = 0  # characters of source already in blocks
        self._time = 0.0  # seconds: where the blocks so far end

    def add(self, audio: np.ndarray, rate: int, words: tuple[Word, ...]) -> AlignedAudio:
        """A chunk of the piece's audio and the words it completes, as one message."""
        self._audio_s += audio.size / rate
        return AlignedAudio(audio, *self._block(list(words), last=False))

    def finish(self) -> AlignedAudio:
        """The piece's last characters, up to the end of its audio (a message without audio)."""
        return AlignedAudio(np.zeros(0, np.float32), *self._block([], last=True))

    def _block(self, words: list[Word], *, last: bool) -> tuple[dict[str, list[Any]] | None, ...]:
        origin = self._time
        original, spoken = _Timeline(), _Timeline()
        for group in _groups(words):
            first, last_word = group[0], group[-1]
            lo = min(max(first.text_start - self.offset, self._cursor), len(self.source))
            hi = min(max(last_word.text_end - self.offset, lo), len(self.source))
            original.add(self.source[self._cursor:lo], self._time, max(first.start, self._time), origin)
            original.add(self.source[lo:hi], max(first.start, self._time), max(last_word.end, self._time), origin)
            for word in group:
                spoken.add(word.word + " ", max(word.start, self._time), max(word.end, self._time), origin)
            self._cursor, self._time = hi, max(self._time, last_word.end)
        if last:
            end = max(self._audio_s, self._time)
            original.add(self.source[self._cursor:], self._time, end, origin)
            self._cursor, self._time = len(self.source), end
        return original.body(), spoken.body()


def _extent(alignment: dict[str, list[Any]] | None) -> int:
    """Milliseconds a block spans: its last character's start plus duration."""
    return alignment["charStartTimesMs"][-1] + alignment["charDurationsMs"][-1] if alignment else 0


def _joined(first: dict[str, list[Any]] | None, second: dict[str, list[Any]] | None,
            shift: int) -> dict[str, list[Any]] | None:
    if second is None:
        return first
    shifted = {**second, "charStartTimesMs": [t + shift for t in second["charStartTimesMs"]]}
    if first is None:
        return shifted
    return {name: first[name] + shifted[name] for name in first}


def _groups(words: list[Word]) -> list[list[Word]]:
    """Consecutive words read from one source span (``$5`` -> "five", "dollars") grouped together."""
    groups: list[list[Word]] = []
    for word in words:
        if groups and (word.text_start, word.text_end) == (groups[-1][0].text_start, groups[-1][0].text_end):
            groups[-1].append(word)
        else:
            groups.append([word])
    return groups
