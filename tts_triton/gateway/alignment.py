"""The server's word timestamps as ElevenLabs' character alignment, one audio message at a time.

A piece's audio is sent in messages that end at word ends: audio is held until a word that ends in it is
reported (the server reports each word with the chunk that completes it), then sent up to that word's end,
with ``alignment`` for the piece's characters up to that word's last one (the characters between words:
spaces, punctuation, fill the silence between them) and ``normalizedAlignment`` for the words as spoken
(``$5`` -> "five dollars "). Times are milliseconds from the start of the message's own audio, so that a
client summing each message's last ``start + duration`` (Pipecat does) tracks the stream's clock. The last
message of a piece carries the rest of its characters and audio. Every character of the piece's source is
in exactly one message, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tts_triton.client import Word

__all__ = ["AlignedAudio", "PieceAligner"]

#: Seconds of audio held at most while no word ends in it (a long word, or a server without word timestamps).
MAX_HOLD_S = 1.0


@dataclass
class AlignedAudio:
    """One message's audio (model rate) and its ``alignment`` / ``normalizedAlignment`` (None: no characters)."""

    audio: np.ndarray
    alignment: dict[str, list[Any]] | None = None
    normalized: dict[str, list[Any]] | None = None

    def then(self, later: AlignedAudio, rate: int) -> AlignedAudio:
        """This message and ``later`` as one (``later``'s times shifted by this one's audio)."""
        shift = round(self.audio.size / rate * 1000)
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
    """Splits one piece's audio into messages at word ends. ``source``: the piece's characters; ``offset``:
    where they start in the text the server was sent (word spans index that text)."""

    def __init__(self, source: str, offset: int) -> None:
        self.source, self.offset = source, offset
        self.rate = 0
        self._audio: list[np.ndarray] = []
        self._held = 0  # samples in _audio
        self._sent = 0  # samples of the piece already in messages
        self._cursor = 0  # characters of source already in messages
        self._time = 0.0  # seconds: where the characters sent so far end
        self._words: list[Word] = []

    def add(self, audio: np.ndarray, rate: int, words: tuple[Word, ...]) -> list[AlignedAudio]:
        """A chunk of the piece's audio and the words it completes; the messages now ready."""
        self.rate = rate
        if audio.size:
            self._audio.append(audio)
            self._held += audio.size
        self._words += words
        if self._words:
            upto = min(round(self._words[-1].end * rate) - self._sent, self._held)
            return [self._message(upto, self._take_words(), last=False)]
        if self._held > MAX_HOLD_S * rate:
            return [self._message(self._held, [], last=False)]
        return []

    def finish(self) -> list[AlignedAudio]:
        """The rest of the audio with the rest of the characters (none if nothing is left)."""
        if not self._held and self._cursor >= len(self.source):
            return []
        return [self._message(self._held, self._take_words(), last=True)]

    def _take_words(self) -> list[Word]:
        words, self._words = self._words, []
        return words

    def _message(self, samples: int, words: list[Word], *, last: bool) -> AlignedAudio:
        samples = max(samples, 0)
        joined = np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)
        audio, rest = joined[:samples], joined[samples:]
        self._audio, self._held = ([rest] if rest.size else []), rest.size
        origin = self._sent / self.rate if self.rate else 0.0
        end_s = (self._sent + samples) / self.rate if self.rate else 0.0
        self._sent += samples
        original, spoken = _Timeline(), _Timeline()
        for group in _groups(words):
            first, last_word = group[0], group[-1]
            lo = min(max(first.text_start - self.offset, self._cursor), len(self.source))
            hi = min(max(last_word.text_end - self.offset, lo), len(self.source))
            original.add(self.source[self._cursor:lo], self._time, first.start, origin)
            original.add(self.source[lo:hi], first.start, last_word.end, origin)
            for word in group:
                spoken.add(word.word + " ", word.start, word.end, origin)
            self._cursor, self._time = hi, max(self._time, last_word.end)
        if last:
            original.add(self.source[self._cursor:], self._time, max(end_s, self._time), origin)
            self._cursor, self._time = len(self.source), max(end_s, self._time)
        return AlignedAudio(audio, original.body(), spoken.body())


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
