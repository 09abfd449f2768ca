"""Text normalization: Unicode cleanup, punctuation mapping, abbreviations and numbers.

The output holds only letters (any script), combining marks, digits next to Chinese characters,
apostrophes inside words, single spaces and the pause punctuation ``, . ? ! ; : … -``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from tts_triton.text.numbers import expand_numbers_tracked
from tts_triton.text.readers import read_plain
from tts_triton.text.roman import read_roman
from tts_triton.text.tracked import Tracked

_PAUSES = ",.?!;:…-"

#: Applied after NFKC (which already maps full-width ASCII such as ，！？：；（） to ASCII).
_CHAR_MAP = str.maketrans({
    "。": ". ", "、": ", ", "〜": "~", "\u2010": "-", "·": " ", "・": " ", "⁄": " over ",
    "‘": "'", "’": "'", "‚": "'", "‛": "'", "ʼ": "'", "`": "'", "´": "'",
    "“": "", "”": "", "„": "", "‟": "", '"': "", "«": "", "»": "", "‹": "", "›": "",
    "「": "", "」": "", "『": "", "』": "", "《": "", "》": "", "〈": "", "〉": "",
    "\u2212": "-", "&": " and ", "@": " at ", "+": " plus ", "=": " equals ", "%": " percent ",
})
#: Characters that survive the category filter because later steps read them.
_KEEP = set(_PAUSES + "'$€£¥₹¢°#/:~")

_PARAGRAPH = re.compile(rf"(?<=[^\s{_PAUSES}])[ \t]*\n\s*\n")
_TITLES = {"Mr": "mister", "Mrs": "missus", "Ms": "miz", "Dr": "doctor", "Prof": "professor", "St": "saint",
           "Mt": "mount", "Capt": "captain", "Gen": "general", "Lt": "lieutenant", "Sgt": "sergeant", "Rev": "reverend"}
_MID_SENTENCE = {"vs": "versus", "approx": "approximately", "e.g": "for example", "i.e": "that is", "no": "number"}
_MAY_END_SENTENCE = {"etc": "et cetera", "Inc": "incorporated", "Ltd": "limited", "Co": "company",
                     "Corp": "corporation", "Jr": "junior", "Sr": "senior", "St": "street", "Ave": "avenue",
                     "Jan": "January", "Feb": "February", "Mar": "March", "Apr": "April", "Jun": "June",
                     "Jul": "July", "Aug": "August", "Sep": "September", "Sept": "September", "Oct": "October",
                     "Nov": "November", "Dec": "December"}
#: a.m. and p.m. spelled so that espeak-ng says the letters: "eigh em" /eɪ ɛm/ ("ay" would be /aɪ/, "AM" the
#: word "am"); "PM" is read as the initialism /piːɛm/.
_CLOCK_READING = {"a": "eigh em", "p": "PM"}
# Titles before a capitalized name; the period is optional after Mr, Mrs, Ms and Dr.
_TITLE = re.compile(rf"\b(?:(Mr|Mrs|Ms|Dr)\.?|({'|'.join(_TITLES)})\.)(?=\s+[A-Z])")
_MID = re.compile(r"\b(vs|approx|e\.g|i\.e|No(?=\.\s*\d))\.")
# a.m. / p.m.: a sentence end too before a capital or at the end of the text.
_CLOCK = re.compile(r"\b([AaPp])\.\s?[Mm]\.(\s+[A-Z]|\s*$)?")
# Kept as a sentence end before a capital or at the end of the text.
_END = re.compile(rf"\b({'|'.join(_MAY_END_SENTENCE)})\.(\s+[A-Z]|\s*$)?")
_INITIALISM = re.compile(r"\b((?:[A-Za-z]\.){2,})(\s*$)?")
_NUMBER_SIGN = re.compile(r"#(?=\s?\d)")
_APPROXIMATELY = re.compile(r"(?<!\w)~(?=\s?\d)")
_UNREAD_SYMBOLS = re.compile(r"[$€£¥₹¢°#/~]")
_URL_DOT = re.compile(r"(?<=[^\W\d_])\.(?=[^\W\d_])")
_WORD_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")
_STRAY_APOSTROPHE = re.compile(r"(?<!\w)'|'(?!\w)")
_ELLIPSIS = re.compile(r"\.{2,}|…+")
_SPACE_BEFORE_PAUSE = re.compile(rf"\s+(?=[{_PAUSES}])")
_REPEATED_PAUSE = re.compile(r"([,?!;:\-])\1+")
_NO_SPACE_AFTER_PAUSE = re.compile(rf"([,?!;:…])(?=[^\s{_PAUSES}])")
_LEADING_PAUSES = re.compile(rf"^[\s{_PAUSES}]+")
_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=8192)
def _filter_char(ch: str) -> str:
    """Keep letters, digits, marks and known punctuation; whitespace -> space; dashes and brackets -> pauses."""
    category = unicodedata.category(ch)
    if ch.isspace():
        return " "
    if ch in _KEEP or category[0] in "LN":
        return ch
    if category in ("Mn", "Mc"):  # combining marks, except the variation selectors that follow emoji
        return "" if "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef" else ch
    if category == "Pd":
        return " - "
    if category in ("Ps", "Pe"):
        return ", "
    # Emoji and other symbols, control and format characters, quotes and rare punctuation.
    return " " if category[0] in "SP" else ""


def _abbreviations(text: Tracked) -> Tracked:
    text = text.sub(_TITLE, lambda m: _TITLES[m[1] or m[2]])
    text = text.sub(_MID, lambda m: _MID_SENTENCE[m[1].lower()] + " ")
    text = text.sub(_CLOCK, lambda m: _CLOCK_READING[m[1].lower()] + ("." + m[2] if m[2] is not None else " "))
    text = text.sub(_END, lambda m: _MAY_END_SENTENCE[m[1]] + ("." + m[2] if m[2] is not None else ""))
    return text.sub(_INITIALISM, lambda m: " ".join(m[1].split(".")).strip() + ("." if m[2] is not None else " "))


def clean_tracked(text: Tracked) -> Tracked:
    """Normalized form of ``text`` (possibly empty), each character with its source span."""
    text = read_plain(text.nfkc()).map_chars(lambda ch: ch.translate(_CHAR_MAP))
    text = text.sub(_PARAGRAPH, ".\n\n").map_chars(_filter_char)
    text = read_roman(_abbreviations(text)).sub(_NUMBER_SIGN, "number ").sub(_APPROXIMATELY, "about ")
    text = expand_numbers_tracked(text)
    text = text.sub(_UNREAD_SYMBOLS, " ")  # the ones no number claimed
    text = text.sub(_URL_DOT, " dot ").sub(_WORD_HYPHEN, " ").sub(_STRAY_APOSTROPHE, " ")
    text = text.sub(_SPACES, " ").strip().sub(_SPACE_BEFORE_PAUSE, "")
    text = text.sub(_ELLIPSIS, "…").sub(_REPEATED_PAUSE, r"\1").sub(_NO_SPACE_AFTER_PAUSE, r"\1 ")
    return text.sub(_LEADING_PAUSES, "")


def clean(text: str) -> str:
    """Normalized form of ``text`` (possibly empty); see the module docstring for what it may contain."""
    return clean_tracked(Tracked.of(text)).text
