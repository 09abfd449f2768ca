"""IPA written by a person (SSML ``<phoneme alphabet="ipa" ph="...">``) -> symbols of the inventory."""

from __future__ import annotations

import unicodedata

from tts_triton.core.symbols import IPA, LENGTH, STRESS, WORD_BOUNDARY
from tts_triton.errors import InvalidInput

_PHONES = frozenset((*STRESS, *LENGTH, *IPA))
#: Common spellings of sounds the inventory writes otherwise (ligatures, ASCII stress and length marks,
#: r-coloured vowels with a hook); "." (syllable break) and "‿" (linking) are not sounds.
_ALIASES = {
    "ʧ": "tʃ", "ʤ": "dʒ", "ʦ": "ts", "ʣ": "dz", "ʨ": "tɕ", "ʥ": "dʑ", "'": "ˈ", "ˡ": "l",
    ":": "ː", "ɜ˞": "ɝ", "ə˞": "ɚ", "˞": "ɹ", "ᵊ": "ə", "ɩ": "ɪ", "ɷ": "ʊ", "g": "ɡ", ".": "", "‿": "",
    "\u035c": "\u0361",  # tie below -> the tie bar
}


def ipa_symbols(ph: str) -> list[str]:
    """Inventory symbols of an IPA string (spaces separate words); raises InvalidInput("TEXT", ...)
    naming the first symbol that has no counterpart in the inventory."""
    symbols: list[str] = []
    text = unicodedata.normalize("NFC", ph.strip())
    i = 0
    while i < len(text):
        pair, ch = text[i : i + 2], text[i]
        if pair in _ALIASES:
            symbols += _ALIASES[pair]
            i += 2
            continue
        i += 1
        if ch.isspace():
            if symbols and symbols[-1] != WORD_BOUNDARY:
                symbols.append(WORD_BOUNDARY)
        elif ch in _ALIASES:
            symbols += _ALIASES[ch]
        elif ch in _PHONES:
            symbols.append(ch)
        elif all(part in _PHONES for part in unicodedata.normalize("NFD", ch)):
            symbols += unicodedata.normalize("NFD", ch)
        else:
            name = unicodedata.name(ch, "unnamed")
            raise InvalidInput("TEXT", f"<phoneme> ph={ph!r}: the IPA symbol {ch!r} (U+{ord(ch):04X} {name}) has "
                                       "no counterpart in the model's phoneme set")
    if not any(s != WORD_BOUNDARY for s in symbols):
        raise InvalidInput("TEXT", f"<phoneme> ph={ph!r} holds no phonemes")
    return symbols
