"""Numbers, currency, ordinals, times and units read out in English words.

Signs: "-10°C" "minus ten degrees Celsius", "-7" "minus seven"; "50¢" "fifty cents"; "10 / 2" (with spaces)
"ten divided by two"; a unit after a number in the singular for 1 ("1 km" "one kilometer", "2 GB" "two
gigabytes"); "km/h" and "m/s" alone "kilometers per hour", "meters per second".

Digits written directly next to a Chinese character are left as digits (only a decimal point
between them becomes 点), so that the Mandarin voice reads them in Chinese.
"""

from __future__ import annotations

import re

from tts_triton.text.tracked import Tracked

_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ("", " thousand", " million", " billion", " trillion", " quadrillion")
#: Longest digit string read as a number; longer ones are read digit by digit (Python refuses ``int()`` of
#: strings over 4300 digits, and nobody says "a thousand quadrillion").
MAX_NUMBER_DIGITS = 15
_ORDINAL = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth",
            "twelve": "twelfth"}
#: Currency symbol -> (unit, units, subunit, subunits); None: no subunit is spoken.
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", None, None),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}
#: Unit after a number -> (singular, plural).
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "m/s": ("meter per second", "meters per second"), "mph": ("mile per hour", "miles per hour"),
    "mpg": ("mile per gallon", "miles per gallon"), "rpm": ("revolution per minute", "revolutions per minute"),
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"), "ft": ("foot", "feet"), "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"), "g": ("gram", "grams"), "lbs": ("pound", "pounds"),
    "lb": ("pound", "pounds"), "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"), "L": ("liter", "liters"),
    "TB": ("terabyte", "terabytes"), "GB": ("gigabyte", "gigabytes"), "MB": ("megabyte", "megabytes"),
    "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"),
    "GHz": ("gigahertz", "gigahertz"), "MHz": ("megahertz", "megahertz"), "kHz": ("kilohertz", "kilohertz"),
    "Hz": ("hertz", "hertz"), "kWh": ("kilowatt hour", "kilowatt hours"), "kW": ("kilowatt", "kilowatts"),
    "ms": ("millisecond", "milliseconds"), "min": ("minute", "minutes"), "hrs": ("hour", "hours"),
    "hr": ("hour", "hours"), "dB": ("decibel", "decibels"),
    "°C": ("degree Celsius", "degrees Celsius"), "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}
#: Compound units written alone, without a number ("speed in km/h").
_BARE_UNITS = {"km/h": "kilometers per hour", "m/s": "meters per second"}

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_NUM = r"\d+(?:\.\d+)?"
_THOUSANDS_SEP = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_HAN_DECIMAL = re.compile(rf"(?<=[{_HAN}])(\d+)\.(\d+)|(\d+)\.(\d+)(?=[{_HAN}])")
_MONEY = re.compile(rf"([{''.join(_CURRENCIES)}])\s?({_NUM})(?:\s?(thousand|million|billion|trillion)\b)?")
# A unit may follow a signed number ("-10°C"); it is never the start of a longer word ("5 men"). Numbers are
# matched from their first digit only: a flood of digits is then read in linear time.
_UNIT_NAMES = "|".join(map(re.escape, sorted(_UNITS, key=len, reverse=True)))  # longest first: "ms" before "m"
_UNIT = re.compile(rf"(?:(?<![\w.])(-))?(?<![\d.])({_NUM})\s?({_UNIT_NAMES})(?![^\W\d_])")
_BARE_UNIT = re.compile(rf"(?<![\w/])({'|'.join(map(re.escape, _BARE_UNITS))})(?![\w/])")
_CENTS = re.compile(rf"(?<![\d.])({_NUM})\s?¢")
# "10 / 2" with spaces is a division ("10/2" without is a fraction, read by the readers).
_DIVISION = re.compile(rf"(?<![\d/])({_NUM})\s+/\s+({_NUM})(?![\d/])")
# Bare numbers: never next to another digit or a Chinese character (then they stay for the Mandarin voice).
_ORDINAL_NUM = re.compile(rf"(?<![\d{_HAN}])(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_TIME = re.compile(rf"(?<![\d{_HAN}])(\d{{1,2}}):(\d\d)(?![\d{_HAN}])")
_NEGATIVE = re.compile(rf"(?<![\w.])-(?={_NUM}(?![\d{_HAN}]))")
_NUMBER = re.compile(rf"(?<![\d{_HAN}])(\d+)(?:\.(\d+))?(?![\d{_HAN}])")


def cardinal(n: int) -> str:
    """``n`` in words: 1234 -> "one thousand two hundred thirty four"; beyond quadrillions, digit by digit."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (" " + _ONES[ones] if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + (" " + cardinal(rest) if rest else "")
    if n >= 1000 ** len(_SCALES):
        return digits(str(n))
    words = []
    for scale in _SCALES:
        n, group = divmod(n, 1000)
        if group:
            words.append(cardinal(group) + scale)
        if not n:
            break
    return " ".join(reversed(words))


def ordinal(n: int) -> str:
    """``n`` as an ordinal: 21 -> "twenty first", 40 -> "fortieth"."""
    head, _, last = cardinal(n).rpartition(" ")
    if last in _ORDINAL:
        last = _ORDINAL[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head} {last}" if head else last


def digits(text: str) -> str:
    """Digit by digit: "007" -> "zero zero seven"."""
    return " ".join(_ONES[int(d)] for d in text)


def year(n: int) -> str:
    """Year reading for 1100-1999 and 2010-2099 ("nineteen oh five"), the cardinal otherwise."""
    if not (1100 <= n <= 1999 or 2010 <= n <= 2099):
        return cardinal(n)
    century, rest = divmod(n, 100)
    if rest == 0:
        return cardinal(century) + " hundred"
    return cardinal(century) + (" oh " if rest < 10 else " ") + cardinal(rest)


def number(integer: str, fraction: str | None = None) -> str:
    """A written number: years for four digits, digit by digit with a leading zero or over ``MAX_NUMBER_DIGITS``."""
    if fraction is not None:
        return f"{number(integer)} point {digits(fraction)}"
    if (len(integer) > 1 and integer[0] == "0") or len(integer) > MAX_NUMBER_DIGITS:
        return digits(integer)
    return year(int(integer)) if len(integer) == 4 else cardinal(int(integer))


def money(symbol: str, amount: str, scale: str | None = None) -> str:
    """Currency: ("$", "5.50") -> "five dollars and fifty cents", ("$", "1.5", "million") -> "... million dollars"."""
    unit, units, subunit, subunits = _CURRENCIES[symbol]
    integer, _, fraction = amount.partition(".")
    if scale:
        return f"{number(integer, fraction or None)} {scale} {units}"
    if (fraction and (subunit is None or len(fraction) > 2)) or len(integer) > MAX_NUMBER_DIGITS:
        return f"{number(integer, fraction)} {units}"
    whole, cents = int(integer), int(fraction.ljust(2, "0")) if fraction else 0
    parts = [f"{cardinal(whole)} {unit if whole == 1 else units}"] if whole or not cents else []
    if cents:
        parts.append(f"{cardinal(cents)} {subunit if cents == 1 else subunits}")
    return " and ".join(parts)


def _time(match: re.Match[str]) -> str:
    hours, minutes = int(match[1]), int(match[2])
    if hours > 24 or minutes > 59:
        return f"{cardinal(hours)} {digits(match[2])}"
    if minutes == 0:
        return f"{cardinal(hours)} o'clock"
    return f"{cardinal(hours)} {'oh ' if minutes < 10 else ''}{cardinal(minutes)}"


def _ordinal(match: re.Match[str]) -> str:
    written = match[1]
    return digits(written) if len(written) > MAX_NUMBER_DIGITS else ordinal(int(written))


def _unit(match: re.Match[str]) -> str:
    singular, plural = _UNITS[match[3]]
    sign = "minus " if match[1] else ""
    return f" {sign}{number(*match[2].split('.'))} {singular if match[2] == '1' else plural} "


def _cents(match: re.Match[str]) -> str:
    return f" {number(*match[1].split('.'))} {'cent' if match[1] == '1' else 'cents'} "


def expand_numbers_tracked(text: Tracked) -> Tracked:
    """Every number in ``text`` replaced by English words (see the module docstring for Chinese context)."""
    text = text.sub(_THOUSANDS_SEP, "")
    text = text.sub(_HAN_DECIMAL, lambda m: f"{m[1] or m[3]}点{m[2] or m[4]}")
    text = text.sub(_MONEY, lambda m: money(m[1], m[2], m[3]))
    text = text.sub(_CENTS, _cents).sub(_DIVISION, r"\1 divided by \2").sub(_BARE_UNIT, lambda m: _BARE_UNITS[m[1]])
    text = text.sub(_UNIT, _unit).sub(_ORDINAL_NUM, _ordinal).sub(_TIME, _time).sub(_NEGATIVE, "minus ")
    return text.sub(_NUMBER, lambda m: f" {number(m[1], m[2])} ")


def expand_numbers(text: str) -> str:
    """Replace every number in ``text`` by English words (see the module docstring for Chinese context)."""
    return expand_numbers_tracked(Tracked.of(text)).text
