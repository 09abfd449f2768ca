"""The text front end: TEXT -> normalized text -> sentences -> phoneme symbols -> id sequences.

    text_to_sequences("Hello there. It costs $5!")  # two sequences: [BOS, ..., EOS], [BOS, ..., EOS]

Each sentence becomes one sequence ``BOS ... EOS``; given ``max_tokens`` (the caller's limit, e.g.
``StreamingConfig.max_tokens``), a longer sentence is cut after clause punctuation, then between words,
and a single giant word anywhere. Bad TEXT raises :class:`FrontendError`, an
:class:`~tts_triton.errors.InvalidInput` naming TEXT. Every function is safe to call from several
threads at once.
"""

from __future__ import annotations

import re

from tts_triton.errors import InvalidInput
from tts_triton.text.g2p import phonemize_clauses
from tts_triton.text.normalize import clean
from tts_triton.text.symbols import (
    BOS_ID,
    EOS_ID,
    N_SYMBOLS,
    PAD_ID,
    PUNCTUATION,
    SYMBOL_TO_ID,
    SYMBOLS,
    WORD_BOUNDARY,
)

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_PAUSES = re.compile(f"([{re.escape(''.join(PUNCTUATION))}]+)")
#: Where an over-long sentence may be cut, in order of preference.
_BREAKS = (frozenset(PUNCTUATION), frozenset(WORD_BOUNDARY))


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
    normalized = clean(check_text(text))
    if not any(ch.isalnum() for ch in normalized):
        raise FrontendError("is empty after normalization: it holds only emoji, symbols or punctuation")
    return normalized


def split_sentences(text: str) -> list[str]:
    """Sentences of normalized text in order, split after . ! ? or … followed by a space."""
    return [sentence for sentence in _SENTENCE_END.split(text.strip()) if sentence]


def phonemize(sentences: list[str]) -> list[list[str]]:
    """Phoneme symbols of each normalized sentence: words separated by " ", punctuation as pause symbols.

    A sentence with nothing pronounceable gives ``[]``; symbols outside the inventory are dropped with a
    warning. All clauses of all sentences go to espeak-ng in one batch per voice.
    """
    parts = [_PAUSES.split(sentence) for sentence in sentences]  # [clause, pauses, clause, ..., clause]
    clauses = iter(phonemize_clauses([clause for p in parts for clause in p[::2]]))
    result = []
    for p in parts:
        symbols: list[str] = []
        for index, piece in enumerate(p):
            if index % 2 == 0:
                clause = next(clauses)
                if clause and symbols:
                    symbols.append(WORD_BOUNDARY)
                symbols += clause
            else:
                for mark in piece:
                    if symbols and symbols[-1] != mark:
                        symbols.append(mark)
        result.append(symbols)
    return result


def text_to_sequences(text: str, max_tokens: int | None = None) -> list[list[int]]:
    """The whole front end: one id list ``BOS ... EOS`` per sentence (or piece of one), in order.

    With ``max_tokens`` every list has at most that many ids (sentences are cut, see the module
    docstring); without, one list per sentence. Raises :class:`FrontendError` as :func:`normalize`
    does, and when nothing in TEXT can be pronounced (e.g. only letters of unsupported scripts).
    """
    sequences = [
        [BOS_ID, *(SYMBOL_TO_ID[s] for s in piece), EOS_ID]
        for symbols in phonemize(split_sentences(normalize(text)))
        if symbols
        for piece in ([symbols] if max_tokens is None else _split(symbols, max_tokens - 2))
    ]
    if not sequences:
        raise FrontendError("has nothing pronounceable: no letters of a supported script")
    return sequences


def sequence_to_text(ids: list[int]) -> str:
    """The symbols of an id sequence as a string, for logs; padding, BOS and EOS left out, bad ids as U+FFFD."""
    return "".join(SYMBOLS[i] if 0 <= i < N_SYMBOLS else "\ufffd" for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID))


def _strip(symbols: list[str]) -> list[str]:
    start, end = 0, len(symbols)
    while start < end and symbols[start] == WORD_BOUNDARY:
        start += 1
    while end > start and symbols[end - 1] == WORD_BOUNDARY:
        end -= 1
    return symbols[start:end]


def _split(symbols: list[str], limit: int, level: int = 0) -> list[list[str]]:
    """Pieces of at most ``limit`` symbols: cut after ``_BREAKS[level]`` symbols, packed greedily, recursing."""
    if len(symbols) <= limit:
        return [symbols]
    if level == len(_BREAKS):
        return [symbols[i : i + limit] for i in range(0, len(symbols), limit)]
    units, start = [], 0
    for i, symbol in enumerate(symbols):
        if symbol in _BREAKS[level]:
            units.append(symbols[start : i + 1])
            start = i + 1
    units.append(symbols[start:])
    pieces: list[list[str]] = []
    for unit in filter(None, map(_strip, units)):
        if pieces and len(pieces[-1]) + 1 + len(unit) <= limit:
            pieces[-1] = [*pieces[-1], WORD_BOUNDARY, *unit]
        else:
            pieces += _split(unit, limit, level + 1)
    return pieces
