"""SSML: the supported subset becomes the same Sentence plan as plain text, with controls, pauses, voices
and word spans pointing into the markup; anything else, and hostile markup, is InvalidInput naming TEXT."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tts_triton.core.symbols import PUNCTUATION, SYMBOL_TO_ID, SYMBOLS
from tts_triton.errors import InvalidInput
from tts_triton.text import Sentence, plan_text, text_to_sequences
from tts_triton.text.ipa import ipa_symbols
from tts_triton.text.planner import is_ssml
from tts_triton.text.ssml import MAX_DEPTH, MAX_ELEMENTS

NS = 'xmlns="http://www.w3.org/2001/10/synthesis"'


def _words(markup: str, sentences: list[Sentence]) -> list[tuple[str, str]]:
    return [(w.text, markup[w.start : w.end]) for s in sentences for w in s.words]


def _check(markup: str, sentences: list[Sentence]) -> None:
    """Every id in at most one word, words in order in ids and markup, the rest boundaries and pauses."""
    for s in sentences:
        owned = [False] * len(s.ids)
        last_id = last_char = 0
        for w in s.words:
            assert 0 < w.first < w.last < len(s.ids) and w.first >= last_id and w.start >= last_char, w
            assert markup[w.start : w.end].strip() and not any(owned[w.first : w.last])
            owned[w.first : w.last] = [True] * (w.last - w.first)
            last_id, last_char = w.last, w.start
        assert all(SYMBOLS[i] in (" ", "^", "$", *PUNCTUATION) for i, o in zip(s.ids, owned, strict=True) if not o)


def test_a_document_with_every_element() -> None:
    markup = (f'<speak {NS} version="1.0" xml:lang="en-US">Hello &amp; welcome.<break time="500ms"/> It is '
              '<say-as interpret-as="date">03/14/2025</say-as>, says <sub alias="World Wide Web Consortium">W3C</sub>.'
              '\r\n<p><prosody rate="slow" pitch="+2st" volume="-6dB"><emphasis level="strong">Really</emphasis> '
              'slow <phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme></prosody></p>'
              '<voice name="m1"><s>Other voice.</s></voice><say-as interpret-as="characters">ABC</say-as></speak>')
    sentences = plan_text(markup)
    _check(markup, sentences)
    assert [(s.rate, s.pitch, s.volume, s.voice, s.pause_after) for s in sentences] == [
        (1.0, 0.0, 0.0, None, 0.5), (1.0, 0.0, 0.0, None, 0.0),
        (pytest.approx(0.75 * 0.85), 4.0, -2.0, None, 0.0), (0.75, 2.0, -6.0, None, 0.0),
        (1.0, 0.0, 0.0, "m1", 0.0), (1.0, 0.0, 0.0, None, 0.0)]
    assert _words(markup, sentences) == [
        ("Hello", "Hello"), ("and", "&amp;"), ("welcome", "welcome"), ("It", "It"), ("is", "is"),
        *((w, "03/14/2025") for w in ("March", "fourteenth", "twenty", "twenty", "five")), ("says", "says"),
        *((w, "W3C") for w in ("World", "Wide", "Web", "Consortium")), ("Really", "Really"), ("slow", "slow"),
        ("tomato", "tomato"), ("Other", "Other"), ("voice", "voice"), *((w, "ABC") for w in ("eigh", "bee", "see"))]
    tomato = sentences[3].words[-1]
    assert sentences[3].ids[tomato.first : tomato.last] == [SYMBOL_TO_ID[s] for s in ipa_symbols("təˈmeɪtoʊ")]


def test_plain_text_inside_speak_reads_as_plain_text() -> None:
    text = "Dr. Smith paid $5.50 on 03/14/2025, in the house. Then he left!"
    sentences = plan_text(f"<speak>{text}</speak>")
    assert [s.ids for s in sentences] == text_to_sequences(text)
    assert [(w.text, w.start - len("<speak>"), w.end - len("<speak>")) for s in sentences for w in s.words] == [
        (w.text, w.start, w.end) for s in plan_text(text) for w in s.words]


def test_spans_count_characters_not_bytes() -> None:
    markup = "\ufeff<speak>Café — naïve 你好 <s>crème</s></speak>"  # a byte-order mark too
    assert _words(markup, plan_text(markup)) == [("Café", "Café"), ("naïve", "naïve"), ("你好", "你好"),
                                                 ("crème", "crème")]


def test_a_break_splits_its_sentence() -> None:
    [first, second] = plan_text('<speak>Hello <break time="1.2s"/> world</speak>')
    assert (first.pause_after, second.pause_before) == (1.2, 0.0)
    assert [w.text for w in first.words] == ["Hello"] and [w.text for w in second.words] == ["world"]
    [only] = plan_text('<speak><break strength="strong"/><break time="300ms"/>Hi<break/></speak>')
    assert (only.pause_before, only.pause_after) == (pytest.approx(1.0), 0.4)  # a bare break is "medium"
    assert len(plan_text('<speak>Hello <break strength="none"/> world</speak>')) == 1


def test_nested_prosody_combines_and_named_values_read() -> None:
    markup = ('<speak><prosody rate="150%" pitch="x-high" volume="loud"><prosody rate="-20%" pitch="-2st" '
              'volume="+2dB">deep</prosody></prosody><prosody pitch="+10%" rate="0.8">ok</prosody></speak>')
    deep, ok = plan_text(markup)
    assert (deep.rate, deep.pitch, deep.volume) == (pytest.approx(1.2), 4.0, 8.0)
    assert (ok.rate, ok.pitch) == (0.8, pytest.approx(1.65, abs=0.01))


@pytest.mark.parametrize(
    ("kind", "content", "said"),
    [("cardinal", "1,234", "one thousand two hundred thirty four"), ("ordinal", "3", "third"),
     ("digits", "2025", "two zero two five"), ("spell-out", "IBM", "eye bee em"),
     ("time", "10:05 pm", "ten oh five PM"), ("telephone", "555-1234", "five five five one two three four"),
     ("cardinal", "many", "many")],  # not a number: read as it is written
)
def test_say_as(kind: str, content: str, said: str) -> None:
    markup = f'<speak>x <say-as interpret-as="{kind}">{content}</say-as></speak>'
    words = _words(markup, plan_text(markup))
    assert words[1:] == [(w, content) for w in said.split()]


def test_say_as_date_formats() -> None:
    markup = '<speak><say-as interpret-as="date" format="ymd">2024-11-05</say-as></speak>'
    assert [w.text for w in plan_text(markup)[0].words] == ["November", "fifth", "twenty", "twenty", "four"]


@pytest.mark.parametrize(
    ("markup", "message"),
    [
        ('<speak><audio src="x.wav"/></speak>', "unsupported SSML element <audio> at line 1, column 7"),
        ("<speak><mark name='a'/>hi</speak>", "unsupported SSML element <mark>"),
        ('<speak><prosody duration="2s">hi</prosody></speak>', "unsupported attribute 'duration' of <prosody>"),
        ('<speak><say-as interpret-as="unit">5kg</say-as></speak>', "<say-as interpret-as='unit'> is not supported"),
        ('<speak><sub>W3C</sub></speak>', "<sub> needs the attribute 'alias'"),
        ('<speak><say-as interpret-as="digits">1<s>2</s></say-as></speak>', "<say-as> holds only text, not <s>"),
        ('<speak><break time="forever"/></speak>', "<break time='forever'>"),
        ('<speak><break time="30s"/></speak>', "at most 10s"),
        ('<speak><prosody rate="warp">hi</prosody></speak>', "<prosody rate='warp'>"),
        ('<speak><prosody pitch="200Hz">hi</prosody></speak>', "<prosody pitch='200Hz'>"),
        ('<speak><prosody volume="+2">hi</prosody></speak>', "<prosody volume='+2'>"),
        ('<speak><emphasis level="max">hi</emphasis></speak>', "<emphasis level='max'>"),
        ('<speak><prosody rate="x-slow"><prosody rate="x-slow"><prosody rate="x-slow">hi</prosody></prosody>'
         '</prosody></speak>', "combined rate 0.125 is outside"),
        ('<speak><voice>hi</voice></speak>', "<voice> needs a name"),
        ('<speak><phoneme alphabet="x-sampa" ph="t@">the</phoneme></speak>', "only ipa"),
        ('<speak><phoneme ph="ǃa">click</phoneme></speak>', "'ǃ' (U+01C3 LATIN LETTER RETROFLEX CLICK)"),
        ("<speak><speak>hi</speak></speak>", "<speak> must be the root element"),
        ("<speak>Hello <s>world</speak>", "malformed SSML: mismatched tag: line 1, column 23"),
        ("<speak>\n  a &nbsp; b</speak>", "malformed SSML: undefined entity: line 2, column 4"),
        ("<speak>hi</speak> trailing", "malformed SSML: junk after document element: line 1"),
        ("<speak>   <break/> </speak>", "has nothing pronounceable"),
    ],
)
def test_refused_markup_names_what_is_wrong(markup: str, message: str) -> None:
    with pytest.raises(InvalidInput, match="^TEXT: ") as caught:
        plan_text(markup)
    assert message in str(caught.value)


def test_what_counts_as_ssml() -> None:
    assert is_ssml("<speak>hi</speak>") and is_ssml('  <?xml version="1.0"?><speak/>') and is_ssml("<speak\n>")
    assert is_ssml("<!DOCTYPE speak><speak/>")  # markup, so that the parser refuses the DTD
    assert not is_ssml("<speaker> is a word") and not is_ssml("Say <speak> to me") and not is_ssml("a < b")
    assert [w.text for s in plan_text("a <b>bold</b> move") for w in s.words][:2] == ["a", "b"]  # plain text


def test_long_sentences_are_cut_to_max_tokens() -> None:
    body = " ".join(["the quick brown fox jumps over the lazy dog"] * 30)
    sentences = plan_text(f'<speak><prosody rate="fast">{body}.</prosody></speak>', 128)
    assert len(sentences) > 2 and all(len(s.ids) <= 128 and s.rate == 1.25 for s in sentences)
    assert [s.ids for s in sentences] == text_to_sequences(body + ".", 128)


# Hostile markup: refused at parser level within a second, nothing read from disk.


def _refused_fast(markup: str, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InvalidInput, match="^TEXT: ") as caught:
        plan_text(markup)
    assert time.perf_counter() - start < 1.0
    assert message in str(caught.value)


def test_billion_laughs_is_refused() -> None:
    entities = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    markup = f'<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY lol0 "lol">{entities}]><speak>&lol9;</speak>'
    _refused_fast(markup, "may not hold a DTD")


@pytest.mark.parametrize("declaration", [
    '<!DOCTYPE speak [<!ENTITY secret SYSTEM "file://{path}">]><speak>&secret;</speak>',
    '<!DOCTYPE speak [<!ENTITY % secret SYSTEM "file://{path}"> %secret;]><speak>hi</speak>',
    '<!DOCTYPE speak SYSTEM "file://{path}"><speak>hi</speak>',
])
def test_external_entities_read_nothing_from_disk(tmp_path: Path, declaration: str) -> None:
    """The 'file' is a FIFO: a parser that opened it would block, and while it holds it open a writer can
    open it; neither happens."""
    fifo = tmp_path / "secret"
    os.mkfifo(fifo)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(_refused_fast, declaration.format(path=fifo), "may not hold a DTD")
        try:
            future.result(timeout=5)
        finally:
            try:  # never blocks: with no reader it raises ENXIO; with one it frees the reader
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                opened = True
            except OSError:
                opened = False
    assert not opened


def test_deep_nesting_is_refused() -> None:
    _refused_fast("<speak>" + "<s>" * 10_000 + "hi" + "</s>" * 10_000 + "</speak>",
                  f"more than {MAX_DEPTH} levels of nesting")


def test_many_elements_are_refused() -> None:
    _refused_fast("<speak>" + "<break/>" * 100_000 + "</speak>", "SSML has 800015 characters; the limit is")
    _refused_fast("<speak>" + "<s>a</s>" * (MAX_ELEMENTS + 1) + "</speak>", f"more than {MAX_ELEMENTS} elements")


def test_malformed_markup_is_refused() -> None:
    _refused_fast("<speak><prosody rate='slow'>unclosed", "malformed SSML: no element found: line 1")
    _refused_fast("<speak>" + "<s>" * 20 + "x</p>", "mismatched tag")


def test_random_markup_is_a_plan_or_invalid_input() -> None:
    """Shuffled pieces of markup, text, references and CDATA: a valid plan or InvalidInput, nothing else."""
    rnd = random.Random(1)
    pieces = ["<s>", "</s>", "<p>", "</p>", '<break time="200ms"/>', '<prosody rate="fast" pitch="+1st">', "</prosody>",
              "<emphasis>", "</emphasis>", '<say-as interpret-as="date">', '<say-as interpret-as="characters">',
              "</say-as>", '<sub alias="x y">', "</sub>", '<phoneme ph="həˈloʊ">', "</phoneme>", '<voice name="f1">',
              "</voice>", "hello", " world. ", "03/14/2025", " 10:05 am ", "&amp;", "&#65;", "<![CDATA[& a < b]]>",
              "\r\n", "é", "你好", " ", "<!-- c -->", "&", "<", "$5", "1/3", "😀"]
    planned = 0
    for _ in range(300):
        markup = "<speak>" + "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 20))) + "</speak>"
        try:
            sentences = plan_text(markup)
        except InvalidInput:
            continue
        _check(markup, sentences)
        planned += 1
    assert planned > 5  # most shuffles are malformed; enough are not


def test_plain_text_needs_no_xml_parser() -> None:
    """A host without defusedxml (e.g. a GPU bundle made before it was a dependency) still reads plain text;
    markup then fails with a message saying what is missing."""
    code = ("import sys; sys.modules['defusedxml'] = None; from tts_triton.text import plan_text; "
            "assert plan_text('Hello there.')[0].words\n"
            "try:\n    plan_text('<speak>hi</speak>')\nexcept RuntimeError as e:\n    print(e)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.startswith("SSML needs the defusedxml package")
