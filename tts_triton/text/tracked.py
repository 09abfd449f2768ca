"""Text that remembers where each of its characters came from.

Normalization rewrites TEXT step by step; a :class:`Tracked` string carries, for every character, the
``[start, end)`` span of the source characters it was made from, so that each spoken word can be traced
back to its place in the request's TEXT. Rewrites keep the spans of characters they copy unchanged (a
common prefix or suffix of the match and its replacement, cut only at a word edge); every other character
of a replacement gets the span of the whole rewritten part, e.g. each word of "March fourteenth" the span
of "03/14".
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

Span = tuple[int, int]
Replacement = str | Callable[[re.Match[str]], str]


def _cut_ok(text: str, i: int) -> bool:
    """Whether position ``i`` of ``text`` is not inside a run of letters and digits."""
    return i <= 0 or i >= len(text) or not (text[i - 1].isalnum() and text[i].isalnum())


@dataclass(frozen=True)
class Tracked:
    """``text`` with ``spans[i]`` the source span of ``text[i]``."""

    text: str
    spans: tuple[Span, ...]

    @classmethod
    def of(cls, text: str, offset: int = 0) -> Tracked:
        """``text`` as its own source, its first character at ``offset``."""
        return cls(text, tuple((offset + i, offset + i + 1) for i in range(len(text))))

    @classmethod
    def join(cls, parts: list[Tracked]) -> Tracked:
        """The parts one after another."""
        return cls("".join(p.text for p in parts), tuple(s for p in parts for s in p.spans))

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, key: slice) -> Tracked:
        return Tracked(self.text[key], self.spans[key])

    def span(self, start: int, end: int) -> Span:
        """Source span of ``text[start:end]``; for an empty range, an empty span where it sits."""
        if start < end:
            return min(s for s, _ in self.spans[start:end]), max(e for _, e in self.spans[start:end])
        if start < len(self.spans):
            return self.spans[start][0], self.spans[start][0]
        return (self.spans[-1][1],) * 2 if self.spans else (0, 0)

    def replace(self, start: int, end: int, new: str) -> Tracked:
        """``text[start:end]`` replaced by ``new``, spans kept where ``new`` copies the old text at its edges."""
        old = self.text[start:end]
        prefix = 0
        while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
            prefix += 1
        while prefix and not (_cut_ok(old, prefix) and _cut_ok(new, prefix)):
            prefix -= 1
        suffix = 0
        while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
            suffix += 1
        while suffix and not (_cut_ok(old, len(old) - suffix) and _cut_ok(new, len(new) - suffix)):
            suffix -= 1
        middle = self.span(start + prefix, end - suffix)
        if start + prefix == end - suffix:  # pure insertion: the span of the whole rewritten part
            middle = self.span(start, end)
        spans = (*self.spans[start : start + prefix], *(middle,) * (len(new) - prefix - suffix),
                 *self.spans[end - suffix : end])
        return Tracked(new, spans)

    def sub(self, pattern: re.Pattern[str], repl: Replacement) -> Tracked:
        """Like ``pattern.sub(repl, text)``, tracking spans (see :meth:`replace`)."""
        parts: list[Tracked] = []
        last = 0
        for match in pattern.finditer(self.text):
            new = repl(match) if callable(repl) else match.expand(repl) if "\\" in repl else repl
            if new == match[0]:
                continue
            parts += [self[last : match.start()], self.replace(match.start(), match.end(), new)]
            last = match.end()
        if not parts:
            return self
        parts.append(self[last:])
        return Tracked.join(parts)

    def map_chars(self, fn: Callable[[str], str]) -> Tracked:
        """Each character replaced by ``fn(character)``, which keeps its span."""
        out = [fn(ch) for ch in self.text]
        if all(map(operator.eq, out, self.text)):
            return self
        return Tracked("".join(out), tuple(span for t, span in zip(out, self.spans, strict=True) for _ in t))

    def nfkc(self) -> Tracked:
        """NFKC, normalized in pieces that start at a character with combining class 0 (the whole text at
        once, every character spanning all of it, in the rare case that pieces would normalize otherwise)."""
        whole = unicodedata.normalize("NFKC", self.text)
        if whole == self.text:
            return self
        starts = [i for i, ch in enumerate(self.text)
                  if i == 0 or (unicodedata.combining(ch) == 0 and not "\u1160" <= ch <= "\u11ff")]
        pieces = [self.replace(a, b, unicodedata.normalize("NFKC", self.text[a:b]))
                  for a, b in zip(starts, [*starts[1:], len(self.text)], strict=True)]
        joined = Tracked.join(pieces)
        return joined if joined.text == whole else Tracked(whole, (self.span(0, len(self)),) * len(whole))

    def strip(self) -> Tracked:
        """Without leading and trailing whitespace."""
        start = len(self.text) - len(self.text.lstrip())
        return self[start : len(self.text.rstrip())]
