"""Roman numerals in the places English writes them, read as a person would.

- After a numbering word (``Chapter IV``, ``Part II``, ``Volume III``, ``Act V``, ``World War II``,
  ``Type 2``'s ``Type II``...): the cardinal, "Chapter four", "World War two".
- After a capitalized name (``Henry VIII``, ``Louis XIV``, ``Elizabeth II``): "the" and the ordinal,
  "Henry the eighth".

Only numerals written in capitals count. After a name, a numeral must be of the letters I, V and X and have
at least two letters or be V or X alone: the pronoun "I" ("Then I left") is never read as a number, nor are
words and initialisms that happen to be numerals ("Washington DC", "CD", "MIX"). "I" alone is a numeral only
after a capitalized numbering word ("World War I", "Part I"). Anything else is left for G2P as written.
"""

from __future__ import annotations

import re

from tts_triton.text.numbers import cardinal, ordinal
from tts_triton.text.tracked import Tracked

_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
#: Words after which a numeral is a cardinal (the numbering of a part, a war, a type...).
NUMBERING_WORDS = ("Chapter", "Part", "Volume", "Vol.", "Book", "Act", "Scene", "Section", "Article", "Appendix",
                   "Phase", "Stage", "Level", "Class", "Type", "Title", "Episode", "Season", "Round", "Grade",
                   "War", "Apollo")
_NUMERAL = r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"
_SMALL = r"X{0,3}(?:IX|IV|V?I{0,3})"  # I-XXXIX: the numerals of names
_KEYWORD = re.compile(rf"\b(?P<word>{'|'.join(re.escape(w) for w in NUMBERING_WORDS)})(?P<space>\s+)"
                      rf"(?P<numeral>{_NUMERAL})(?![\w'’])", re.IGNORECASE)
_NAME = re.compile(rf"\b(?P<name>[A-Z][a-z]+)(?P<space>\s+)(?P<numeral>{_SMALL})(?![\w'’])")


def roman_value(numeral: str) -> int | None:
    """The value of a well-formed Roman numeral in capitals (``"XIV"`` -> 14); None for anything else."""
    if not numeral or not re.fullmatch(_NUMERAL, numeral):
        return None
    total = 0
    for letter, after in zip(numeral, [*numeral[1:], ""], strict=True):
        value = _VALUES[letter]
        total += -value if after and _VALUES[after] > value else value
    return total


def _keyword(match: re.Match[str]) -> str:
    numeral, word = match["numeral"], match["word"]
    if not numeral.isupper() or (numeral == "I" and not word[0].isupper()):
        return match[0]
    value = roman_value(numeral)
    return match[0] if value is None else f"{word}{match['space']}{cardinal(value)}"


def _name(match: re.Match[str]) -> str:
    numeral = match["numeral"]
    if numeral == "I" or match["name"].title() in NUMBERING_WORDS:
        return match[0]
    value = roman_value(numeral)
    return match[0] if value is None else f"{match['name']}{match['space']}the {ordinal(value)}"


def read_roman(text: Tracked) -> Tracked:
    """Every Roman numeral of the kinds in the module docstring replaced by its reading."""
    return text.sub(_KEYWORD, _keyword).sub(_NAME, _name)
