"""The incremental text cutter: where streamed text is cut, fed a few characters at a time (pure logic)."""

from __future__ import annotations

import pytest

from tts_triton.text.incremental import Piece, TextCutter


def cut(text: str, step: int = 3, schedule: tuple[int, ...] = (50,)) -> list[Piece]:
    """Pieces of ``text`` fed ``step`` characters at a time, then flushed; checks they tile the text."""
    cutter = TextCutter(schedule)
    pieces = [p for i in range(0, len(text), step) for p in cutter.feed(text[i:i + step])] + cutter.flush()
    assert [p.start for p in pieces] == sorted(p.start for p in pieces)
    for a, b in zip(pieces, pieces[1:], strict=False):
        assert a.start + len(a.source) == b.start  # no character lost or repeated
    return pieces


def sources(text: str, **kwargs: object) -> list[str]:
    return [p.source for p in cut(text, **kwargs)]


def test_sentences_are_cut_as_soon_as_they_are_certain() -> None:
    cutter = TextCutter()
    assert cutter.feed("Hello there.") == []  # "there.com" or "there.5" may follow
    assert [p.source for p in cutter.feed(" ")] == ["Hello there. "]  # whatever follows, a sentence ended
    assert cutter.feed("It co") == [] and cutter.buffered == len("It co")
    assert [(p.source, p.start, p.reason) for p in cutter.flush()] == [("It co", 13, "flush")]


@pytest.mark.parametrize("text", [
    "It costs $5.50 today. Then we left.",
    "Pi is 3.14159 and e is 2.71828. Then we left.",
    "Visit www.example.com/a.b today. Then we left.",
    "Mr. Smith met Dr. Jones at 10 a.m. Then we left.",
    "We met on Jan. 5, 2025 at noon. Then we left.",
    "Prices rose, e.g. bread and milk. Then we left.",
])
def test_no_cut_inside_a_number_url_abbreviation_or_date(text: str) -> None:
    for step in (1, 2, 5):
        assert sources(text, step=step) == [text[:-len("Then we left.")], "Then we left."], step


def test_clauses_and_words_are_cut_only_past_the_schedule() -> None:
    text = "First we went out to the market, then we came back home, tired but happy after a very long day"
    pieces = cut(text, schedule=(40,))
    assert [p.reason for p in pieces] == ["clause", "clause", "flush"]
    assert pieces[0].source == "First we went out to the market, "
    assert pieces[0].text == "First we went out to the market"  # the model stops after "." or nothing, not ","
    words = cut("one two three four five six seven eight nine ten eleven twelve", schedule=(10,))
    assert words[0].reason == "word" and all(p.source.endswith(" ") for p in words[:-1])
    assert sources("Short, and sweet, but not cut", schedule=(120,)) == ["Short, and sweet, but not cut"]


def test_unpronounceable_text_waits_for_something_to_say() -> None:
    cutter = TextCutter()
    assert cutter.feed(" ") == [] and cutter.flush() == []
    assert cutter.feed("... ") == [] and cutter.flush() == []
    assert [p.source for p in cutter.feed("Yes. And")] == [" ... Yes. "]


def test_ssml_is_cut_only_between_children_of_speak() -> None:
    text = ("<speak>Hello there. <break time='1s'/>How <emphasis>are you. Really</emphasis> today? "
            "<say-as interpret-as='cardinal'>12</say-as>. Bye.</speak>")
    pieces = cut(text, step=4)
    assert all(p.ssml for p in pieces)
    assert [p.source for p in pieces] == ["Hello there. ",  # a <break/> alone says nothing: it waits
                                          "<break time='1s'/>How <emphasis>are you. Really</emphasis> today? ",
                                          "<say-as interpret-as='cardinal'>12</say-as>. ", "Bye."]
    assert pieces[0].text == "<speak>Hello there. </speak>" and pieces[0].text_offset == len("<speak>")
    assert pieces[0].start == len("<speak>")


def test_a_bad_schedule_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk_length_schedule"):
        TextCutter(())


def test_each_cut_normalises_a_bounded_window_whatever_is_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 16 KB message of short sentences: each cut reads a few words around it, not the whole buffer (normalised
    whole for each cut, "Go now. " x 2,048 took 45 s of the gateway's event loop)."""
    from tts_triton.text import incremental

    normalised = []
    real = incremental.clean_tracked
    monkeypatch.setattr(incremental, "clean_tracked", lambda text: normalised.append(len(text.text)) or real(text))
    for repeats in (256, 2048):
        normalised.clear()
        text = "Go now. " * repeats
        pieces = TextCutter().feed(text)
        assert len(pieces) == repeats and "".join(p.source for p in pieces) == text
        assert sum(normalised) < 20 * len(text), (repeats, sum(normalised))  # was ~repeats x len(text) / 2
