"""Word timestamps from the decoder's attention: which phoneme each step speaks, through the words' spans.

Decoder step ``s`` emits source frames ``[s*r, (s+1)*r)`` while attending to the tokens in its alignment
row; its *position* is the running maximum of the rows' argmax, so positions never move back. A word
(phonemes ``ids[first:last]``) starts at the first step whose position reaches ``first`` and ends at the
first step whose position reaches ``last`` (it is then complete), or at the end of the sentence. Source
frames map to the stream through the rate (``frame / speed``) and the stream's offset in frames: times are
monotonic, inside the sentence's audio, and a pause lies between the words around it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tts_triton.core import audio
from tts_triton.text.sentence import Word


@dataclass(frozen=True)
class WordTime:
    """A word on the stream's timeline: seconds ``[start, end)``, its character span ``[text_start, text_end)``."""

    word: str
    start: float
    end: float
    text_start: int
    text_end: int


def words_json(words: Sequence[WordTime]) -> bytes:
    """The WORDS output of one response: a JSON list of :class:`WordTime` objects."""
    return json.dumps([asdict(w) for w in words], ensure_ascii=False).encode()


class WordClock:
    """Times the words of one sentence as decoder steps arrive.

    ``offset`` is the sentence's first output frame on the stream; ``speed`` its rate; ``r`` the frames per
    decoder step. :meth:`push` takes each call's alignment rows ``[steps, tokens]``; :meth:`take` hands out
    the finished words that end by a given output frame, in order, each once.
    """

    def __init__(self, words: Sequence[Word], r: int, speed: float, offset: int) -> None:
        self.words = list(words)
        self.r, self.speed, self.offset = r, speed, offset
        self.steps = 0
        self.position = -1
        self.starts: list[float | None] = [None] * len(self.words)
        self.ends: list[float | None] = [None] * len(self.words)
        self.given = 0

    def _frame(self, step: int) -> float:
        return self.offset + step * self.r / self.speed

    def push(self, alignment: np.ndarray) -> None:
        for row in alignment:
            self.position = max(self.position, int(np.argmax(row)))
            for i, w in enumerate(self.words):
                if self.starts[i] is None and self.position >= w.first:
                    self.starts[i] = self._frame(self.steps)
                if self.ends[i] is None and self.position >= w.last:
                    self.ends[i] = self._frame(self.steps)
            self.steps += 1

    def finish(self, frames: int) -> None:
        """The sentence ended with ``frames`` output frames: words not yet ended end there."""
        end = float(self.offset + frames)
        for i in range(len(self.words)):
            self.starts[i] = min(end, self.starts[i] if self.starts[i] is not None else end)
            self.ends[i] = min(end, self.ends[i] if self.ends[i] is not None else end)

    def take(self, until_frame: float) -> list[WordTime]:
        """The next finished words that end by output frame ``until_frame``."""
        out = []
        while self.given < len(self.words):
            start, end = self.starts[self.given], self.ends[self.given]
            if end is None or end > until_frame or start is None:
                break
            w = self.words[self.given]
            out.append(WordTime(w.text, _seconds(start), _seconds(end), w.start, w.end))
            self.given += 1
        return out


def _seconds(frame: float) -> float:
    return round(frame * audio.HOP_LENGTH / audio.SAMPLE_RATE, 4)
