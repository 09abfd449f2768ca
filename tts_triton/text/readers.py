"""Readers: written forms read as a person would (US English conventions), for plain text and ``say-as``.

Conventions: dates are month first (``03/14/2025`` "March fourteenth, twenty twenty five"; day first only
when the first number cannot be a month), ISO dates ``2024-11-05`` likewise; a month name before a day
makes the day an ordinal (``Jan. 5`` "January fifth"); fractions ``1/3`` "one third" (``1/2`` "one half",
``3/4`` "three quarters", ``24/7`` "twenty four seven", denominators over 100 "over"); version numbers of
three or more parts, or after "version"/"v", ``3.11.7`` "three point eleven point seven"; IPv4 addresses
with "dot"; phone numbers digit by digit in their groups (``123-4567`` "one two three, four five six
seven"); decades ``1990s`` "nineteen nineties"; ranges ``10-20``, ``10–20`` "ten to twenty"; feet and
inches ``6'2"`` "six feet two inches"; times with am/pm ``10:05 am`` "ten oh five eigh em";
URLs and e-mail addresses with their punctuation named ("www.example.com/a_b" "double you double you
double you dot example dot com slash a underscore b"). Each reader returns None when its text is not of
its form.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tts_triton.text.numbers import _ONES, cardinal, digits, number, ordinal, year
from tts_triton.text.tracked import Tracked

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
#: Letter names that espeak-ng reads as the letter (a lone "a" would be the article /ɐ/).
LETTERS = dict(zip("abcdefghijklmnopqrstuvwxyz", (
    "eigh", "bee", "see", "dee", "ee", "ef", "gee", "aitch", "eye", "jay", "kay", "el", "em", "en", "oh", "pee",
    "cue", "ar", "ess", "tee", "you", "vee", "double you", "ex", "why", "zee"), strict=True))
SYMBOL_NAMES = {
    ".": "dot", "/": "slash", ":": "colon", "-": "dash", "_": "underscore", "@": "at", "?": "question mark",
    "=": "equals", "&": "and", "#": "hash", "~": "tilde", "%": "percent", "+": "plus", ",": "comma",
    "'": "apostrophe", "*": "star", "!": "exclamation mark", "$": "dollar", "(": "open paren",
    ")": "close paren", ";": "semicolon", "\\": "backslash", "|": "bar", "^": "caret",
}
_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}
#: Slashed numbers that are names, not fractions ("24/7" is a schedule, not 3.43).
_FIXED_FRACTIONS = {"24/7": "twenty four seven", "50/50": "fifty fifty", "9/11": "nine eleven"}
_SPELLED = frozenset(("www", "http", "https", "ftp"))

_MONTH_NAMES = "|".join([*MONTHS, *(m[:3] + r"\.?" for m in MONTHS if len(m) > 3), r"Sept\.?"])
_URL = re.compile(r"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'«»“”]+[^\s<>\"'«»“”.,;:!?)\]]")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z\d-]+(?:\.[A-Za-z\d-]+)+\b")
_DATE_SLASH = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")
_DATE_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")
_MONTH_DAY = re.compile(rf"\b({_MONTH_NAMES})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![:.,]?\d)")
# am/pm without periods ("a.m." is normalization's: its period may end a sentence).
_CLOCK_TIME = re.compile(r"(?<![\d:])(\d{1,2})(?::(\d\d))?(?::(\d\d))? *([AaPp])[Mm]\b")
_SECONDS_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d\d):(\d\d)(?![\d:])")
_PHONE = re.compile(r"(?<![\w+-])(?:\+(\d{1,3})[ .-]?)?(?:\((\d{3})\)\s?|(\d{3})[ .-])?(\d{3})-(\d{4})(?![\w-])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_VERSION = re.compile(r"(?<![\d.])(\d+(?:\.\d+){2,})(?![\d.]*\d)|(?<=\b[Vv])(\d+\.\d+)\b|"
                      r"(?<=\b[Vv]ersion )(\d+\.\d+)\b")
_MIXED_FRACTION = re.compile(r"(?<![\d/.])(\d+) (\d{1,3})/(\d{1,3})(?![\d/])")
_FRACTION = re.compile(r"(?<![\d/.])(\d{1,3})/(\d{1,3})(?![\d/])")
_DECADE = re.compile(r"(?<![\w'’])(?:(\d\d)|['’])?(\d)0s\b")
# Ranges: "10-20" (a hyphen between bare numbers), "10–20" or "3~5" (an en dash or tilde, spaces allowed).
_RANGE = re.compile(r"(?<![\w.,:/~–-])(\d{1,15}(?:\.\d+)?)(?:-|\s?[–~]\s?)(\d{1,15}(?:\.\d+)?)"
                    r"(?![\w:/~–]|-\d|\.\d)")
# Feet and inches: 6'2", 6′2″, 5' 11''; feet alone with the prime sign (6′); inches alone with the double prime
# or a straight double quote that opens no quotation (a 12" pizza).
_FEET_INCHES = re.compile(r"(?<![\w.'’])(\d{1,2})\s?['’′]\s?(\d{1,2}(?:\.\d+)?)\s?(?:[\"”″]|''|′′)")
_FEET = re.compile(r"(?<![\w.'’])(\d{1,3}(?:\.\d+)?)′(?!′)")
_INCHES = re.compile(r"(?<![\w.'’])(\d{1,3}(?:\.\d+)?)(?:″|′′|\")")
_WORD_PIECES = re.compile(r"[^\W\d_]+|\d+|\S")


def characters(text: str) -> str:
    """Letter by letter, digit by digit, naming symbols: "A-1" -> "eigh dash one"; other letters as they are."""
    words = []
    for ch in text:
        if ch.isspace():
            continue
        if ch.lower() in LETTERS:
            words.append(LETTERS[ch.lower()])
        elif ch.isdigit() and ch.isascii():
            words.append(_ONES[int(ch)])
        else:
            words.append(SYMBOL_NAMES.get(ch, ch))
    return " ".join(words)


def read_cardinal(text: str) -> str | None:
    """"1,234" or "-5" in words; None if it is not a whole number."""
    match = re.fullmatch(r"([+-]?)(\d{1,3}(?:,\d{3})+|\d+)", text.strip())
    if match is None:
        return None
    words = cardinal(int(match[2].replace(",", "")))
    return "minus " + words if match[1] == "-" else words


def read_ordinal(text: str) -> str | None:
    """"21" or "21st" as an ordinal; None otherwise."""
    match = re.fullmatch(r"(\d{1,15})(?:st|nd|rd|th)?", text.strip(), re.IGNORECASE)
    return ordinal(int(match[1])) if match else None


def read_digits(text: str) -> str | None:
    """Digit by digit, ignoring spaces and dashes; None if there is anything else."""
    bare = re.sub(r"[\s-]", "", text)
    return digits(bare) if bare.isdigit() and bare.isascii() else None


def _year(written: str) -> str:
    return ("oh " + _ONES[int(written[1])] if written[0] == "0" else cardinal(int(written))) \
        if len(written) == 2 else year(int(written))


def date_words(month: int, day: int | None = None, year_written: str | None = None) -> str | None:
    """"March fourteenth, twenty twenty five"; None for an impossible month or day."""
    if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
        return None
    words = MONTHS[month - 1] + (f" {ordinal(day)}" if day is not None else "")
    if year_written is not None:
        words += (", " if day is not None else " ") + _year(year_written)
    return words


def read_date(text: str, order: str = "mdy") -> str | None:
    """A date written with / - or . between its numbers, in ``order`` (say-as's format: "mdy", "dmy",
    "ymd", "md", "dm", "ym", "my", "y", ...); None if it is not one."""
    parts = re.split(r"[/.-]", text.strip())
    if len(parts) != len(order) or not all(p.isdigit() and p.isascii() for p in parts) or set(order) - set("mdy"):
        return None
    fields = dict(zip(order, parts, strict=True))
    if "m" not in fields:
        return _year(fields["y"]) if "y" in fields and len(fields) == 1 and len(fields["y"]) in (2, 4) else None
    day = int(fields["d"]) if "d" in fields else None
    return date_words(int(fields["m"]), day, fields.get("y"))


def _slash_date(match: re.Match[str]) -> str:
    first, second = int(match[1]), int(match[2])
    month, day = (second, first) if first > 12 >= second else (first, second)
    return date_words(month, day, match[3]) or match[0]


def _iso_date(match: re.Match[str]) -> str:
    return date_words(int(match[2]), int(match[3]), match[1]) or match[0]


def _month_day(match: re.Match[str]) -> str:
    name = match[1].rstrip(".")
    month = next(m for m in MONTHS if m.startswith(name[:3]))
    day = int(match[2])
    return f"{month} {ordinal(day)}" if 1 <= day <= 31 else match[0]


def clock(hours: int, minutes: int = 0, seconds: int | None = None, meridiem: str | None = None) -> str | None:
    """"ten oh five", "ten eigh em", "ten oh five and thirty seconds"; None for an impossible time."""
    if hours > (12 if meridiem else 24) or minutes > 59 or (seconds is not None and seconds > 59):
        return None
    words = cardinal(hours)
    if minutes:
        words += (" oh " if minutes < 10 else " ") + cardinal(minutes)
    elif meridiem is None and seconds is None:
        words += " o'clock"
    if seconds is not None:
        words += (" and " if minutes else " ") + cardinal(seconds) + (" second" if seconds == 1 else " seconds")
    if meridiem:  # spelled so that espeak-ng says the letters (see normalize._CLOCK_READING)
        words += " eigh em" if meridiem.lower() == "a" else " PM"
    return words


def read_time(text: str) -> str | None:
    """"10:05", "10:05:30", "10 am", "10:05 p.m." in words; None if it is not a time."""
    text = text.strip()
    match = _CLOCK_TIME.fullmatch(text)
    if match:
        return clock(int(match[1]), int(match[2] or 0), int(match[3]) if match[3] else None, match[4])
    match = re.fullmatch(r"(\d{1,2})(?:\s?([AaPp])\.?[Mm]\.?)", text) or re.fullmatch(
        r"(\d{1,2}):(\d\d)(?::(\d\d))?\s?(?:([AaPp])\.?[Mm]\.?)?", text)
    if match and match.re.groups == 2:
        return clock(int(match[1]), meridiem=match[2])
    return clock(int(match[1]), int(match[2]), int(match[3]) if match[3] else None, match[4]) if match else None


def _clock_time(match: re.Match[str]) -> str:
    return clock(int(match[1]), int(match[2] or 0), int(match[3]) if match[3] else None, match[4]) or match[0]


def _seconds_time(match: re.Match[str]) -> str:
    return clock(int(match[1]), int(match[2]), int(match[3])) or match[0]


def read_telephone(text: str) -> str | None:
    """Digit by digit in the number's groups, a pause between groups, "plus" for "+"; None without digits
    or with anything but digits, spaces, dashes, dots, brackets and a leading "+"."""
    text = text.strip()
    if not re.fullmatch(r"\+?[\d\s().-]*\d[\d\s().-]*", text):
        return None
    groups = re.findall(r"\d+", text)
    return ("plus " if text.startswith("+") else "") + ", ".join(map(digits, groups))


def _phone(match: re.Match[str]) -> str:
    return read_telephone(match[0]) or match[0]


def fraction(numerator: int, denominator: int) -> str:
    """"one third", "two thirds", "one half", "three quarters"; "x over y" for a denominator over 100 or 0."""
    if denominator in (0, 1) or denominator > 100:
        return f"{cardinal(numerator)} over {cardinal(denominator)}"
    one, many = _FRACTION_NAMES.get(denominator) or (ordinal(denominator), ordinal(denominator) + "s")
    return f"{cardinal(numerator)} {one if numerator == 1 else many}"


def _fraction(match: re.Match[str]) -> str:
    if match[0] in _FIXED_FRACTIONS:
        return _FIXED_FRACTIONS[match[0]]
    return fraction(int(match[1]), int(match[2]))


def _mixed_fraction(match: re.Match[str]) -> str:
    numerator, denominator = int(match[2]), int(match[3])
    if not 0 < numerator < denominator:
        return match[0]
    return f"{number(match[1])} and {fraction(numerator, denominator)}"


def _version(match: re.Match[str]) -> str:
    return " point ".join(number(part) for part in (match[1] or match[2] or match[3]).split("."))


def _ipv4(match: re.Match[str]) -> str:
    parts = match[0].split(".")
    return (" point " if any(int(p) > 255 for p in parts) else " dot ").join(map(number, parts))


def decade(tens_and_century: str) -> str:
    """"1990" -> "nineteen nineties", "90" -> "nineties", "2000" -> "two thousands"."""
    words = year(int(tens_and_century)) if len(tens_and_century) == 4 else cardinal(int(tens_and_century))
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}" if head else last


def _decade(match: re.Match[str]) -> str:
    return decade((match[1] or "") + match[2] + "0")


def _range(match: re.Match[str]) -> str:
    return f"{match[1]} to {match[2]}"


def _plural(amount: str, one: str, many: str) -> str:
    return f"{amount} {one if amount == '1' else many}"


def _feet_inches(match: re.Match[str]) -> str:
    return f"{_plural(match[1], 'foot', 'feet')} {_plural(match[2], 'inch', 'inches')}"


def _inches(match: re.Match[str]) -> str:
    if match[0].endswith('"') and match.string.count('"', 0, match.start()) % 2:
        return match[0]  # the closing quote of a quotation, not inches
    return _plural(match[1], "inch", "inches")


def read_address(text: str) -> str:
    """A URL or e-mail address with its punctuation named: words as words, "www" and schemes letter by
    letter, digits one by one."""
    words = []
    for piece in _WORD_PIECES.findall(text):
        if piece.isdigit():
            words.append(digits(piece) if piece.isascii() else piece)
        elif piece.lower() in _SPELLED or (len(piece) == 1 and piece.isalpha()):
            words.append(characters(piece))
        elif piece[0].isalpha():
            words.append(piece)
        else:
            words.append(SYMBOL_NAMES.get(piece, ""))
    return " ".join(w for w in words if w)


#: Plain-text readers, in order: addresses first (they hold dates' and numbers' characters), phone numbers before
#: ranges ("555-1234"), ranges before times ("3-4 pm").
_PLAIN: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_URL, lambda m: read_address(m[0])), (_EMAIL, lambda m: read_address(m[0])),
    (_DATE_SLASH, _slash_date), (_DATE_ISO, _iso_date), (_MONTH_DAY, _month_day), (_PHONE, _phone),
    (_RANGE, _range), (_CLOCK_TIME, _clock_time), (_SECONDS_TIME, _seconds_time), (_IPV4, _ipv4),
    (_VERSION, _version), (_MIXED_FRACTION, _mixed_fraction), (_FRACTION, _fraction), (_DECADE, _decade),
    (_FEET_INCHES, _feet_inches), (_FEET, lambda m: _plural(m[1], "foot", "feet")), (_INCHES, _inches),
)


def read_plain(text: Tracked) -> Tracked:
    """Every written form above in ``text`` replaced by its reading, set apart by spaces."""
    for pattern, reader in _PLAIN:
        text = text.sub(pattern, lambda m, read=reader: f" {words} " if (words := read(m)) != m[0] else m[0])
    return text
