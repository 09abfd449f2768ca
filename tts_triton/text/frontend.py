"""The text front end: TEXT -> normalized text -> sentences -> phoneme symbols -> id sequences.

    text_to_sequences("Hello there. It costs $5!")  # two sequences: [BOS, ..., EOS], [BOS, ..., EOS]

Each sentence becomes one sequence ``BOS ... EOS``; given ``max_tokens`` (the caller's limit, e.g.
``StreamingConfig.max_tokens``), a longer sentence is cut after clause punctuation, then between words,
and a single giant word anywhere. The ``*_tracked`` functions do the same on :class:`Tracked` text, so
that every phoneme symbol keeps the word it belongs to and every word its span in TEXT
(:func:`plan_plain`). Bad TEXT raises :class:`FrontendError`, an :class:`~tts_triton.errors.InvalidInput`
naming TEXT. Every function is safe to call from several threads at once.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, NamedTuple

from tts_triton.core.symbols import (
    BOS_ID,
    EOS_ID,
    N_SYMBOLS,
    PAD_ID,
    PUNCTUATION,
    SYMBOL_TO_ID,
    SYMBOLS,
    WORD_BOUNDARY,
)
from tts_triton.errors import InvalidInput
from tts_triton.text import lexicon
from tts_triton.text.g2p import Span, phonemize_words
from tts_triton.text.normalize import clean_tracked
from tts_triton.text.sentence import Sentence, Word
from tts_triton.text.tracked import Tracked

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_PAUSES = re.compile(f"([{re.escape(''.join(PUNCTUATION))}]+)")
#: Where an over-long sentence may be cut, in order of preference.
_BREAKS = (frozenset(PUNCTUATION), frozenset(WORD_BOUNDARY))


class Spoken(NamedTuple):
    """A word as read aloud, its source span in the request's TEXT, and ``key``: its place in the
    normalized text, which tells two words of one reading apart."""

    text: str
    start: int
    end: int
    key: int


#: A phoneme symbol and the word it belongs to (None for word boundaries and pauses).
Symbol = tuple[str, Spoken | None]


class FrontendError(InvalidInput):
    """TEXT cannot be synthesized (not a string, empty, too long, or nothing pronounceable)."""

    def __init__(self, reason: str) -> None:
        super().__init__("TEXT", reason)


def check_text(text: str, max_chars: int | None = None) -> str:
    """``text`` itself if it is a string with something besides whitespace and at most ``max_chars``
    characters (no limit when None); raises :class:`FrontendError` otherwise."""
    if not isinstance(text, str):
        raise FrontendError(f"must be a string, got {type(text).__name__}")
    if not text.strip():
        raise FrontendError("is empty or only whitespace")
    if max_chars is not None and len(text) > max_chars:
        raise FrontendError(f"has {len(text)} characters; the limit is {max_chars}")
    return text


def normalize(text: str) -> str:
    """TEXT in normalized form (see :mod:`tts_triton.text.normalize`); never empty.

    Raises :class:`FrontendError` as :func:`check_text` does, and when TEXT normalizes to nothing.
    """
    return normalize_tracked(Tracked.of(check_text(text))).text


def normalize_tracked(text: Tracked) -> Tracked:
    """:func:`normalize` keeping each character's source span; raises :class:`FrontendError` likewise."""
    normalized = clean_tracked(text)
    if not any(ch.isalnum() for ch in normalized.text):
        raise FrontendError("is empty after normalization: it holds only emoji, symbols or punctuation")
    return normalized


def split_sentences(text: str) -> list[str]:
    """Sentences of normalized text in order, split after . ! ? or … followed by a space."""
    return [sentence.text for sentence in split_tracked(Tracked.of(text))]


def split_tracked(text: Tracked) -> list[Tracked]:
    """:func:`split_sentences` keeping each character's source span."""
    text = text.strip()
    cuts = [0, *(i for m in _SENTENCE_END.finditer(text.text) for i in (m.start(), m.end())), len(text)]
    return [text[a:b] for a, b in zip(cuts[::2], cuts[1::2], strict=True) if b > a]


def phonemize(sentences: list[str]) -> list[list[str]]:
    """Phoneme symbols of each normalized sentence: words separated by " ", punctuation as pause symbols.

    A sentence with nothing pronounceable gives ``[]``; symbols outside the inventory are dropped with a
    warning. All clauses of all sentences go to espeak-ng in one batch per voice.
    """
    return [[s for s, _ in symbols] for symbols in phonemize_tracked(list(map(Tracked.of, sentences)))]


def phonemize_tracked(sentences: list[Tracked]) -> list[list[Symbol]]:
    """:func:`phonemize`, each symbol with the :class:`Spoken` word it belongs to (None for boundaries
    and pauses); words of the serving lexicon (:mod:`~tts_triton.text.lexicon`) as it says."""
    parts = [_pieces(s.text) for s in sentences]
    words = iter(_phonemize(
        [s.text[a:b] for s, p in zip(sentences, parts, strict=True) for a, b in p[::2]], lexicon.current()))
    result = []
    for sentence, sentence_parts in zip(sentences, parts, strict=True):
        symbols: list[Symbol] = []
        for index, (a, b) in enumerate(sentence_parts):
            clause = sentence.text[a:b]
            if index % 2 == 0:
                labelled = next(words)
                if labelled and symbols:
                    symbols.append((WORD_BOUNDARY, None))
                spoken = {span: Spoken(clause[span[0]:span[1]], *sentence.span(a + span[0], a + span[1]), a + span[0])
                          for span in {span for _, span in labelled if span is not None}}
                symbols += [(symbol, None if span is None else spoken[span]) for symbol, span in labelled]
            else:
                for mark in clause:
                    if symbols and symbols[-1][0] != mark:
                        symbols.append((mark, None))
        result.append(symbols)
    return result


def _phonemize(clauses: list[str], lex: lexicon.Lexicon | None) -> list[list[tuple[str, Span | None]]]:
    """:func:`~tts_triton.text.g2p.phonemize_words` of the clauses, the words of ``lex`` read as it says: an IPA
    entry's symbols, or the respelling through G2P (its symbols spanning the word). A clause with such words is
    read in pieces around them; all pieces of all clauses go to G2P in one batch."""
    found = [lex.matches(clause) for clause in clauses] if lex is not None else []
    if not any(found):
        return phonemize_words(clauses)
    plans: list[list[tuple[int, int, lexicon.Pronunciation | None]]] = []
    texts: list[str] = []
    for clause, matches in zip(clauses, found, strict=True):
        plan: list[tuple[int, int, lexicon.Pronunciation | None]] = []
        last = 0
        for start, end, entry in [*matches, (len(clause), len(clause), None)]:
            if start > last or (entry is None and not plan):
                plan.append((last, start, None))
                texts.append(clause[last:start])
            if entry is not None:
                plan.append((start, end, entry))
                if entry.respelling:
                    texts.append(entry.respelling)
            last = end
        plans.append(plan)
    read = iter(phonemize_words(texts))
    result = []
    for plan in plans:
        labelled: list[tuple[str, Span | None]] = []
        for start, end, entry in plan:
            if entry is None:
                part = [(s, None if span is None else (span[0] + start, span[1] + start)) for s, span in next(read)]
            elif entry.respelling:
                part = [(s, None if span is None else (start, end)) for s, span in next(read)]
            else:
                part = [(s, None if s == WORD_BOUNDARY else (start, end)) for s in entry.symbols]
            if part and labelled and WORD_BOUNDARY not in (labelled[-1][0], part[0][0]):
                labelled.append((WORD_BOUNDARY, None))
            labelled += part
        result.append(labelled)
    return result


def text_to_sequences(text: str, max_tokens: int | None = None) -> list[list[int]]:
    """The whole front end for plain text: one id list ``BOS ... EOS`` per sentence (or piece of one), in order.

    With ``max_tokens`` every list has at most that many ids (sentences are cut, see the module
    docstring); without, one list per sentence. Raises :class:`FrontendError` as :func:`normalize`
    does, and when nothing in TEXT can be pronounced (e.g. only letters of unsupported scripts).
    """
    return [sentence.ids for sentence in plan_plain(text, max_tokens)]


def plan_plain(text: str, max_tokens: int | None = None) -> list[Sentence]:
    """:func:`text_to_sequences` as :class:`~tts_triton.text.sentence.Sentence` objects with their words."""
    sentences = plan_tracked(Tracked.of(check_text(text)), max_tokens)
    if not sentences:
        raise FrontendError("has nothing pronounceable: no letters of a supported script")
    return sentences


def plan_tracked(text: Tracked, max_tokens: int | None = None) -> list[Sentence]:
    """Sentences of a piece of text whose spans point into the request's TEXT ([] if nothing in it is
    pronounceable); raises :class:`FrontendError` when it normalizes to nothing."""
    return [sentence(piece)
            for symbols in phonemize_tracked(split_tracked(normalize_tracked(text)))
            if symbols
            for piece in cut(symbols, max_tokens)]


def cut(symbols: list[Symbol], max_tokens: int | None) -> list[list[Symbol]]:
    """A sentence's symbols in pieces of at most ``max_tokens - 2`` (room for BOS and EOS); whole if None."""
    return [symbols] if max_tokens is None else _split(symbols, max_tokens - 2)


def sentence(symbols: list[Symbol], **controls: Any) -> Sentence:
    """``BOS symbols EOS`` as a Sentence; its words are the runs of symbols of one :class:`Spoken` word."""
    ids = [BOS_ID, *(SYMBOL_TO_ID[s] for s, _ in symbols), EOS_ID]
    runs: list[list[int]] = []  # [first, last] of each word's run of symbols
    owners: list[Spoken] = []
    for position, (_, spoken) in enumerate(symbols, start=1):
        if spoken is None:
            continue
        if owners and spoken == owners[-1]:
            runs[-1][1] = position + 1
        else:
            owners.append(spoken)
            runs.append([position, position + 1])
    words = [Word(o.text, o.start, o.end, first, last) for o, (first, last) in zip(owners, runs, strict=True)]
    return Sentence(ids, words, **controls)


def sequence_to_text(ids: list[int]) -> str:
    """The symbols of an id sequence as a string, for logs; padding, BOS and EOS left out, bad ids as U+FFFD."""
    return "".join(SYMBOLS[i] if 0 <= i < N_SYMBOLS else "\ufffd" for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID))


def _pieces(sentence: str) -> list[tuple[int, int]]:
    """Ranges of ``[clause, pauses, clause, ..., clause]`` in a sentence (clauses may be empty)."""
    cuts = [0, *(i for m in _PAUSES.finditer(sentence) for i in (m.start(), m.end())), len(sentence)]
    return list(itertools.pairwise(cuts))


def _strip(symbols: list[Symbol]) -> list[Symbol]:
    start, end = 0, len(symbols)
    while start < end and symbols[start][0] == WORD_BOUNDARY:
        start += 1
    while end > start and symbols[end - 1][0] == WORD_BOUNDARY:
        end -= 1
    return symbols[start:end]


def _split(symbols: list[Symbol], limit: int, level: int = 0) -> list[list[Symbol]]:
    """Pieces of at most ``limit`` symbols: cut after ``_BREAKS[level]`` symbols, packed greedily, recursing."""
    if len(symbols) <= limit:
        return [symbols]
    if level == len(_BREAKS):
        return [symbols[i : i + limit] for i in range(0, len(symbols), limit)]
    units, start = [], 0
    for i, (symbol, _) in enumerate(symbols):
        if symbol in _BREAKS[level]:
            units.append(symbols[start : i + 1])
            start = i + 1
    units.append(symbols[start:])
    pieces: list[list[Symbol]] = []
    for unit in filter(None, map(_strip, units)):
        if pieces and len(pieces[-1]) + 1 + len(unit) <= limit:
            pieces[-1] = [*pieces[-1], (WORD_BOUNDARY, None), *unit]
        else:
            pieces += _split(unit, limit, level + 1)
    return pieces
