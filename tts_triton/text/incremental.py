"""Text that arrives a few characters at a time, cut into pieces worth synthesizing as soon as they are complete.

    cutter = TextCutter()
    cutter.feed("Hello there. It co")   # [Piece("Hello there. ", start=0)]: the first sentence is complete
    cutter.feed("sts $5.")              # []: "$5." may still become "$5.50"
    cutter.flush()                      # [Piece("It costs $5.", start=13)]

Cuts follow the text planner's own rules (:mod:`tts_triton.text.normalize`, :func:`~tts_triton.text.frontend.
split_tracked`): a cut is made only where the planner, reading the buffered text followed by any likely
continuation (a capital, a small letter, a digit), ends a sentence there, and where the text before the cut
reads alone exactly as it reads in context. So no cut falls inside a number, a date, an abbreviation, a URL
or any other reading. Sentence ends are cut as soon as they are certain; a clause mark (``, ; : -``) or,
failing that, a word boundary once the buffer holds ``schedule[i]`` characters (piece ``i``; the last
value repeats; ElevenLabs' ``chunk_length_schedule``), resp. twice that. SSML (the text starts with
``<speak``) is cut only between the children of ``<speak>``, never inside an element; each piece is sent
wrapped in ``<speak>``. Whitespace and unpronounceable text stay in the buffer until something pronounceable
follows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tts_triton.text.frontend import _SENTENCE_END, split_tracked
from tts_triton.text.normalize import clean, clean_tracked
from tts_triton.text.tracked import Tracked

__all__ = ["DEFAULT_SCHEDULE", "Piece", "TextCutter"]

#: ElevenLabs' default ``chunk_length_schedule``: characters buffered before a cut that is not a sentence end.
DEFAULT_SCHEDULE = (120, 160, 250, 290)
#: What may follow the buffered text: a cut stands only if the planner keeps it for each of them.
_CONTINUATIONS = ("A", "a", "5")
#: Words before a cut that the planner reads together with it (the longest readings, dates such as
#: "March 14, 2025" or "$5 million", span fewer).
CONTEXT_WORDS = 4
_SENTENCE_CUT = re.compile(r"[.!?…]+[\"'”’)\]]*\s+")
_CLAUSE_CUT = re.compile(r"(?:[,;:]|\s[-–—])[\"'”’)\]]*\s+")
_WORD_CUT = re.compile(r"\s+")
_NON_SPACE = re.compile(r"\S")
#: Characters a window reaches from its cut at most (a run of that many without a space is read as one word).
_WINDOW_CHARS = 400
_TRAILING_CLAUSE_MARK = re.compile(r"\s*[,;:\-–—][\"'”’)\]]*\s*$")
_SPEAK = re.compile(r"<speak(?![\w-])")
_SSML_START = re.compile(r"\s*<speak(?![\w-])[^>]*>")
_TAG = re.compile(r"<(/?)([A-Za-z][\w:-]*)[^>]*?(/?)>")
_SSML_BOUNDARY_TAGS = frozenset({"s", "p", "break"})
SPEAK_OPEN, SPEAK_CLOSE = "<speak>", "</speak>"


@dataclass(frozen=True)
class Piece:
    """Characters ``[start, start + len(source))`` of the stream's text; ``text`` is what to synthesize
    (``source``, or for SSML ``<speak>source</speak>``, ``source`` then starting at ``text_offset``);
    ``reason``: what cut it (``sentence``, ``clause``, ``word``, ``flush``)."""

    source: str
    start: int
    reason: str
    ssml: bool = False

    @property
    def text(self) -> str:
        """What to synthesize. A clause mark a plain piece ends with is left out: the model ends an utterance
        only after sentence-final punctuation or none (the shipped voice never stopped after a final comma)."""
        if self.ssml:
            return f"{SPEAK_OPEN}{self.source}{SPEAK_CLOSE}"
        return _TRAILING_CLAUSE_MARK.sub("", self.source) if self.reason == "clause" else self.source

    @property
    def text_offset(self) -> int:
        return len(SPEAK_OPEN) if self.ssml else 0


class TextCutter:
    """The stream's text so far and the pieces cut from it; not thread-safe (one per stream)."""

    def __init__(self, schedule: Sequence[int] = DEFAULT_SCHEDULE) -> None:
        if not schedule or any(n < 1 for n in schedule):
            raise ValueError(f"chunk_length_schedule must be positive numbers, got {list(schedule)}")
        self.schedule = tuple(schedule)
        self.text = ""
        self.cut_at = 0  # characters of ``text`` already in pieces (or skipped markup)
        self.pieces = 0
        self._ssml: bool | None = None  # decided by the first characters that are not whitespace
        self._verdicts: dict[tuple[int, bool], bool] = {}  # cuts judged with real text after them

    @property
    def buffered(self) -> int:
        """Characters waiting for a cut."""
        return len(self.text) - self.cut_at

    def feed(self, text: str) -> list[Piece]:
        """Add ``text``; the pieces now complete, in order."""
        self.text += text
        out: list[Piece] = []
        while (piece := self._next()) is not None:
            out.append(piece)
        return out

    def flush(self) -> list[Piece]:
        """Everything buffered, as one piece if any of it is pronounceable (else it stays buffered)."""
        out = self.feed("")
        end = len(self.text)
        if self._ssml:
            close = self.text.rfind(SPEAK_CLOSE, self.cut_at)
            end = close if close >= 0 else end
        if self._pronounceable(self.cut_at, end):
            out.append(self._take(end, "flush"))
        return out

    def _next(self) -> Piece | None:
        if self._ssml is None and not self._detect():
            return None
        cut = self._ssml_cut() if self._ssml else self._plain_cut()
        return None if cut is None else self._take(*cut)

    def _detect(self) -> bool:
        """Decide plain text or SSML once the first characters allow; False while they do not yet."""
        head = self.text[self.cut_at:].lstrip()
        if not head or (len(head) < len("<speak") and "<speak".startswith(head)):
            return False
        if _SPEAK.match(head) is None:
            self._ssml = False
            return True
        start = _SSML_START.match(self.text, self.cut_at)
        if start is None:
            return False  # the <speak ...> tag is still arriving
        self._ssml, self.cut_at = True, start.end()
        return True

    def _take(self, end: int, reason: str) -> Piece:
        piece = Piece(self.text[self.cut_at:end], self.cut_at, reason, bool(self._ssml))
        self.cut_at = end
        self.pieces += 1
        self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] > end}
        return piece

    def _threshold(self) -> int:
        return self.schedule[min(self.pieces, len(self.schedule) - 1)]

    def _plain_cut(self) -> tuple[int, str] | None:
        base, end = self.cut_at, len(self.text)
        for match in _SENTENCE_CUT.finditer(self.text, base):
            if self._verdict(match.end(), sentence=True):
                return match.end(), "sentence"
        threshold = self._threshold()
        for pattern, reason, needed in ((_CLAUSE_CUT, "clause", threshold), (_WORD_CUT, "word", 2 * threshold)):
            if end - base < needed:
                continue
            for match in reversed(list(pattern.finditer(self.text, base, end))):
                if match.end() < end and self._verdict(match.end(), sentence=False):
                    return match.end(), reason
        return None

    def _verdict(self, cut: int, *, sentence: bool) -> bool:
        """:meth:`_stable`, remembered once text follows the cut (more text does not change a reading there)."""
        key = (cut, sentence)
        if key in self._verdicts:
            return self._verdicts[key]
        verdict = self._stable(cut, sentence=sentence)
        if _NON_SPACE.search(self.text, cut):
            self._verdicts[key] = verdict
        return verdict

    def _stable(self, cut: int, *, sentence: bool) -> bool:
        """Whether cutting the buffer at ``cut`` (an index into :attr:`text`) keeps every reading whatever comes
        next, and (``sentence``) whether the planner ends a sentence there. Readings are local: the planner reads
        a window of :data:`CONTEXT_WORDS` words before the cut and as many after it, so that each cut costs the
        same however much text is buffered (the whole buffer, normalised for each cut, made a 16 KB message
        quadratic: 45 s)."""
        if not any(ch.isalnum() for ch in self.text[self.cut_at:cut]):
            return False
        start = self._words_back(cut)
        end = self._words_ahead(cut)
        buffer, cut = self.text[start:end], cut - start
        alone = clean(buffer[:cut]).rstrip()
        tails = [""] if buffer[cut:].strip() else _CONTINUATIONS
        for tail in tails:
            normalized = clean_tracked(Tracked.of(buffer + tail))
            before = sum(1 for start, _ in normalized.spans if start < cut)
            if normalized.text[:before].rstrip() != alone:
                return False
            if any(start < cut for start, _ in normalized.spans[before:]):
                return False  # a reading spans the cut
            if sentence and not self._sentence_boundary(normalized, before):
                return False
        return True

    def _words_back(self, cut: int) -> int:
        """Where the window before ``cut`` starts: :data:`CONTEXT_WORDS` words back, within the buffer."""
        low = max(self.cut_at, cut - _WINDOW_CHARS)
        starts = [m.end() for m in _WORD_CUT.finditer(self.text, low, cut)]
        return starts[-CONTEXT_WORDS - 1] if len(starts) > CONTEXT_WORDS else low

    def _words_ahead(self, cut: int) -> int:
        """Where the window after ``cut`` ends: before the word :data:`CONTEXT_WORDS` words on (or the text's end)."""
        seen = 0
        for match in _WORD_CUT.finditer(self.text, cut, min(len(self.text), cut + _WINDOW_CHARS)):
            if match.start() == cut:
                continue
            seen += 1
            if seen > CONTEXT_WORDS:
                return match.start()
        return min(len(self.text), cut + _WINDOW_CHARS)

    @staticmethod
    def _sentence_boundary(normalized: Tracked, index: int) -> bool:
        if index >= len(normalized.text.rstrip()):
            return bool(split_tracked(normalized))
        return any(m.start() <= index <= m.end() for m in _SENTENCE_END.finditer(normalized.text))

    def _ssml_cut(self) -> tuple[int, str] | None:
        """The first place between children of <speak> after a sentence end in text, </s>, </p> or <break/>,
        with something pronounceable before it."""
        depth, position = 0, self.cut_at
        for match in [*_TAG.finditer(self.text, self.cut_at), None]:
            data_end = len(self.text) if match is None else match.start()
            if depth == 0:
                for end in _SENTENCE_CUT.finditer(self.text, position, data_end):
                    if (end.end() < data_end or match is not None) and self._pronounceable(self.cut_at, end.end()):
                        return end.end(), "sentence"
            if match is None:
                return None
            closing, name, empty = match[1], match[2], match[3]
            depth += -1 if closing else 0 if empty else 1
            if depth < 0:  # </speak>: the rest of the stream is not spoken
                return None
            if depth == 0 and name in _SSML_BOUNDARY_TAGS and self._pronounceable(self.cut_at, match.end()):
                return match.end(), "sentence"
            position = match.end()
        return None

    def _pronounceable(self, start: int, end: int) -> bool:
        text = self.text[start:end]
        if self._ssml:
            text = _TAG.sub(" ", text)
        return any(ch.isalnum() for ch in clean(text))
