"""espeak-ng's pronunciations in the CMU phone set, so that flite says what the front end wrote down.

The student's targets are the text front end's phoneme ids (espeak-ng, as served). flite pronounces with
the CMU lexicon instead; driven with a lexicon addendum made here (:func:`addenda`), it speaks espeak-ng's
phonemes for every word of the sentence, in context (weak forms, linking), with its own phrasing, intonation
and durations.

The mapping (:func:`to_cmu`) reads one word's inventory symbols: length marks are dropped (the CMU set has no
length contrast), every vowel takes the stress mark before it (``ˈ`` or ``ˌ`` -> 1, none -> 0: flite's lexicon
knows two levels, and a secondary stress marks a full vowel), r after an
r-coloured vowel merges into it, the flap becomes ``t`` or ``d`` by the word's spelling, the glottal stop
``t``, and a syllabic consonant schwa (``ax0``) plus the consonant. :func:`surface` gives the segments flite
prints for such phones (``-ps``: no stress digits), which :func:`agreement` compares with what flite said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tts_triton.core.symbols import STRESS

#: Vowels of espeak-ng's English (length marks removed), longest first -> CMU vowel without stress.
_VOWELS = {
    "aɪ": "ay", "aʊ": "aw", "eɪ": "ey", "oʊ": "ow", "ɔɪ": "oy",
    "ɪ": "ih", "ᵻ": "ih", "ə": "ax", "ɐ": "ax", "ɚ": "er", "ɜ": "er", "i": "iy", "æ": "ae", "ɛ": "eh",
    "ʌ": "ah", "u": "uw", "ʊ": "uh", "ɑ": "aa", "ɔ": "ao", "o": "ao", "e": "eh", "a": "aa",
}
_CONSONANTS = {
    "tʃ": "ch", "dʒ": "jh", "p": "p", "b": "b", "t": "t", "d": "d", "k": "k", "ɡ": "g", "g": "g", "f": "f",
    "v": "v", "θ": "th", "ð": "dh", "s": "s", "z": "z", "ʃ": "sh", "ʒ": "zh", "h": "hh", "m": "m", "n": "n",
    "ŋ": "ng", "l": "l", "ɹ": "r", "r": "r", "w": "w", "j": "y", "ʔ": "t", "x": "k", "ç": "hh",
}
_FLAP = "ɾ"
_SYLLABIC = "\u0329"
_R_COLOURED = frozenset({"er"})
_TOKEN = re.compile("|".join(map(re.escape, sorted([*_VOWELS, *_CONSONANTS, _FLAP, *STRESS, _SYLLABIC],
                                                   key=len, reverse=True))) + "|.", re.DOTALL)
#: The CMU phone set of flite's lexicon (vowels carry a stress digit, 0 or 1).
CMU_VOWELS = frozenset(_VOWELS.values())
CMU_CONSONANTS = frozenset(_CONSONANTS.values())
#: Endings flite's tokenizer splits off a word as words of their own ("smith's" -> "smith" "'s").
_CLITICS = ("'s", "'ll")


class MappingError(ValueError):
    """An espeak-ng symbol that has no CMU phone."""


def to_cmu(symbols: str, spelling: str = "") -> list[str]:
    """One word's inventory symbols (word boundaries ignored) -> CMU phones with stress digits on vowels.

    ``spelling`` decides the flap: ``t`` when the word is spelled with a t, else ``d``. Raises
    :class:`MappingError` for a symbol outside the table.
    """
    phones: list[str] = []
    stress = "0"
    for token in _TOKEN.findall(symbols.replace("ː", "").replace("ˑ", "").replace(" ", "")):
        if token in STRESS:
            stress = "1"
        elif token in _VOWELS:
            vowel = _VOWELS[token]
            phones.append(("ah" if vowel == "ax" and stress == "1" else vowel) + stress)  # a stressed schwa is ʌ
            stress = "0"
        elif token == _FLAP:
            phones.append("t" if "t" in spelling.lower() else "d")
        elif token == _SYLLABIC:
            if not phones or phones[-1] in CMU_VOWELS or phones[-1][:-1] in CMU_VOWELS:
                raise MappingError(f"syllabic mark after {phones[-1:]} in {symbols!r}")
            phones.insert(len(phones) - 1, "ax0")
        elif token in _CONSONANTS:
            phone = _CONSONANTS[token]
            previous = phones[-1] if phones else ""
            if phone == "r" and (previous == "r" or previous[:-1] in _R_COLOURED):
                continue  # linking or doubled r: the CMU "er" holds its r
            phones.append(phone)
        else:
            raise MappingError(f"no CMU phone for {token!r} in {symbols!r}")
    return phones


def flite_words(word: str) -> list[str]:
    """The lexicon keys flite looks ``word`` up under: lowercase, split at hyphens, with "'s" and "'ll"
    split off as words of their own and every other apostrophe dropped (flite's English tokenizer)."""
    keys: list[str] = []
    for part in word.lower().split("-"):
        clitic = next((c for c in _CLITICS if part.endswith(c) and len(part) > len(c)), None)
        base = part[: -len(clitic)] if clitic else part
        keys += [k for k in (base.replace("'", ""), clitic) if k]
    return keys


def split_clitic(keys: Sequence[str], phones: Sequence[str]) -> list[tuple[str, list[str]]] | None:
    """Share a word's phones out among its flite keys (:func:`flite_words`); None when that is ambiguous
    (more than one key without a clitic, or a clitic whose sound is not the word's last phone)."""
    if len(keys) == 1:
        return [(keys[0], list(phones))]
    if len(keys) == 2 and keys[1] in _CLITICS:
        sound = {"'s": ("s", "z"), "'ll": ("l",)}[keys[1]]
        if len(phones) > 1 and phones[-1] in sound:
            return [(keys[0], list(phones[:-1])), (keys[1], [phones[-1]])]
    return None


def addenda(words: Iterable[tuple[str, str]]) -> tuple[dict[str, list[str]], int]:
    """A lexicon addendum for one sentence from its ``(word as read, inventory symbols)`` pairs, in order.

    Returns ``(key -> CMU phones, words left to flite's own lexicon)``: a word whose keys cannot be given
    phones unambiguously, or whose key already holds another pronunciation in this sentence (the first
    one wins), is counted as left out.
    """
    entries: dict[str, list[str]] = {}
    left = 0
    for word, symbols in words:
        parts = split_clitic(flite_words(word), to_cmu(symbols, word))
        if parts is None or any(not p or entries.get(k, p) != p for k, p in parts):
            left += 1
            continue
        entries.update(parts)
    return entries, left


def addenda_text(entries: dict[str, list[str]]) -> str:
    """The addendum as flite's ``-add_lex`` file: one ``word : phones`` line each."""
    return "".join(f"{key} : {' '.join(phones)}\n" for key, phones in entries.items())


def surface(phones: Iterable[str]) -> list[str]:
    """The segments flite prints (``-ps``) for lexicon phones: stress digits dropped."""
    return [p.rstrip("01") for p in phones]


def agreement(expected: Sequence[str], said: Sequence[str]) -> float:
    """1 - (phone edit distance / expected phones) between two segment lists, pauses left out; 0 at worst."""
    a = [p for p in expected if p != "pau"]
    b = [p for p in said if p != "pau"]
    if not a:
        return 1.0 if not b else 0.0
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        diag, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (x != y))
    return max(0.0, 1.0 - row[-1] / len(a))
