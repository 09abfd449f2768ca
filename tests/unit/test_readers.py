"""Readers: the written forms a new user tries, read as a person would (US conventions), in plain text
and through the functions that SSML's say-as uses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tts_triton.text import normalize, plan_text, split_sentences
from tts_triton.text.readers import (
    characters,
    decade,
    fraction,
    read_address,
    read_cardinal,
    read_date,
    read_digits,
    read_ordinal,
    read_telephone,
    read_time,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the examples, each once read wrongly
        ("03/14/2025", "March fourteenth, twenty twenty five"),
        ("2024-11-05", "November fifth, twenty twenty four"),
        ("1/3", "one third"),
        ("Version 3.11.7 is out.", "Version three point eleven point seven is out."),
        ("123-4567", "one two three, four five six seven"),
        ("1990s", "nineteen nineties"),
        ("10:05 am", "ten oh five eigh em"),
        ("see https://www.example.com/a_b?x=1.", "see aitch tee tee pee ess colon slash slash double you double "
                                                "you double you dot example dot com slash eigh underscore bee "
                                                "question mark ex equals one."),
        ("mail john.doe@example.com.", "mail john dot doe at example dot com."),
        # more of each kind
        ("14/03/2025", "March fourteenth, twenty twenty five"),  # day first only when it cannot be a month
        ("on 7/4/76", "on July fourth, seventy six"),
        ("March 14, 2025", "March fourteenth, twenty twenty five"),
        ("2/3 and 1/2 and 3/4 and 5/16", "two thirds and one half and three quarters and five sixteenths"),
        ("2 1/2 cups, open 24/7", "two and one half cups, open twenty four seven"),
        ("v3.11 and version 2.7", "v three point eleven and version two point seven"),
        ("3.14", "three point one four"),  # two parts without "version" stay a decimal
        ("at 192.168.0.1", "at one hundred ninety two dot one hundred sixty eight dot zero dot one"),
        ("call (555) 123-4567 or 555-123-4567",
         "call five five five, one two three, four five six seven or five five five, one two three, four five six "
         "seven"),
        ("the '90s, the 2000s, the 1900s and the 2010s",
         "the nineties, the two thousands, the nineteen hundreds and the twenty tens"),
        ("at 10am, 3:30 PM or 10:05:30", "at ten eigh em, three thirty PM or ten oh five and thirty seconds"),
        ("at 10 a.m. He left.", "at ten eigh em. He left."),  # a.m. keeps ending a sentence
    ],
)
def test_plain_text_readings(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_version_numbers_do_not_break_sentences() -> None:
    assert split_sentences(normalize("Version 3.11.7 is out. Update now.")) == [
        "Version three point eleven point seven is out.", "Update now."]


def test_reading_words_point_at_their_source() -> None:
    text = "Due 03/14/2025 at 10:05 am, call 123-4567."
    words = [(w.text, text[w.start : w.end]) for s in plan_text(text) for w in s.words]
    assert words[:6] == [("Due", "Due"), *((w, "03/14/2025") for w in ("March", "fourteenth", "twenty", "twenty",
                                                                         "five"))]
    assert ("eigh", "10:05 am") in words and ("seven", "123-4567") in words


@pytest.mark.parametrize(
    ("reader", "text", "expected"),
    [
        (characters, "ABC-1", "eigh bee see dash one"),
        (read_cardinal, "1,234", "one thousand two hundred thirty four"),
        (read_cardinal, "-5", "minus five"),
        (read_cardinal, "5th", None),
        (read_ordinal, "21", "twenty first"),
        (read_ordinal, "3rd", "third"),
        (read_digits, "2025", "two zero two five"),
        (read_digits, "12a", None),
        (read_time, "10:05", "ten oh five"),
        (read_time, "7 pm", "seven PM"),
        (read_time, "25:00", None),
        (read_telephone, "+1 (555) 123-4567", "plus one, five five five, one two three, four five six seven"),
        (read_telephone, "call me", None),
        (read_address, "www.a-b.org", "double you double you double you dot eigh dash bee dot org"),
    ],
)
def test_say_as_readers(reader: Callable[[str], str | None], text: str, expected: str | None) -> None:
    assert reader(text) == expected


@pytest.mark.parametrize(
    ("text", "order", "expected"),
    [
        ("03/14/2025", "mdy", "March fourteenth, twenty twenty five"),
        ("14.03.2025", "dmy", "March fourteenth, twenty twenty five"),
        ("2024-11-05", "ymd", "November fifth, twenty twenty four"),
        ("11/05", "md", "November fifth"),
        ("2024-11", "ym", "November twenty twenty four"),
        ("1999", "y", "nineteen ninety nine"),
        ("13/14/2025", "mdy", None),
        ("03/14", "mdy", None),
    ],
)
def test_read_date(text: str, order: str, expected: str | None) -> None:
    assert read_date(text, order) == expected


def test_fractions_and_decades() -> None:
    assert [fraction(1, 3), fraction(3, 2), fraction(1, 250)] == ["one third", "three halves", "one over two hundred "
                                                                                                "fifty"]
    assert [decade("1980"), decade("60"), decade("2000")] == ["nineteen eighties", "sixties", "two thousands"]
