"""Text front end: normalization, sentence splitting, espeak-ng G2P and the id sequences it yields."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tts_triton.core.config import STREAMING
from tts_triton.core.symbols import BOS_ID, EOS_ID, N_SYMBOLS, PAD_ID, PUNCTUATION, SYMBOL_TO_ID, SYMBOLS, TONES
from tts_triton.errors import InvalidInput
from tts_triton.text import (
    FrontendError,
    Sentence,
    normalize,
    phonemize,
    plan_text,
    sequence_to_text,
    split_sentences,
    text_to_sequences,
)
from tts_triton.text.frontend import _split, check_text
from tts_triton.text.numbers import cardinal, ordinal, year

MAX_TOKENS = STREAMING.max_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # currency
        ("$5", "five dollars"),
        ("$1", "one dollar"),
        ("It costs $5.50.", "It costs five dollars and fifty cents."),
        ("$0.99", "ninety nine cents"),
        ("€2.05", "two euros and five cents"),
        ("£3", "three pounds"),
        ("¥100", "one hundred yen"),
        ("$1.5 million", "one point five million dollars"),
        ("＄５", "five dollars"),
        # numbers, ordinals, units, times
        ("42", "forty two"),
        ("1,000,000 people", "one million people"),
        ("3.14", "three point one four"),
        ("-7 degrees", "minus seven degrees"),
        ("in 1999 and 2005 and 2024", "in nineteen ninety nine and two thousand five and twenty twenty four"),
        ("agent 007", "agent zero zero seven"),
        ("ABC123", "ABC one hundred twenty three"),
        ("1st 2nd 3rd 4th", "first second third fourth"),
        ("the 22nd and 40th and 101st", "the twenty second and fortieth and one hundred first"),
        ("50% off", "fifty percent off"),
        ("30°C", "thirty degrees Celsius"),
        ("1 km, 5 kg, 90 km/h", "one kilometer, five kilograms, ninety kilometers per hour"),
        ("#1 fan, ~5 people, 3~5", "number one fan, about five people, three to five"),  # a range
        ("at 10:30 or 3:05 or 7:00", "at ten thirty or three oh five or seven o'clock"),
        # abbreviations
        ("Dr. Smith met Mr Jones and Mrs. Brown.", "doctor Smith met mister Jones and missus Brown."),
        ("St. Louis", "saint Louis"),
        ("cats vs. dogs, e.g. pets", "cats versus dogs, for example pets"),
        ("No. 5", "number five"),
        ("apples, pears, etc.", "apples, pears, et cetera."),
        ("at 9 a.m. today", "at nine eigh em today"),
        ("It ends at 5 p.m.", "It ends at five PM."),
        # a day after a month is an ordinal (the readers; it was "January five")
        ("On Jan. 5 at 3 P.M. in the hall.", "On January fifth at three PM in the hall."),
        ("Born in Sept. 2001, on a Dec. night.", "Born in September two thousand one, on a December night."),
        ("the U.S.A. team", "the U S A team"),
        # addresses are read with their punctuation, "www" letter by letter (it was "www dot example dot com")
        ("visit www.example.com", "visit double you double you double you dot example dot com"),
        ("Tom & Jerry", "Tom and Jerry"),
        # Chinese full-width punctuation, brackets and quotes; digits next to Chinese stay for Mandarin
        ("你好，世界！", "你好, 世界!"),
        ("真的吗？是的。", "真的吗? 是的."),
        ("一、二；三：四", "一, 二; 三: 四"),
        ("「引用」和《书名》", "引用和书名"),
        ("等等……", "等等…"),
        ("我有3个苹果，价格3.5元", "我有3个苹果, 价格3点5元"),
        ("ＡＢＣ！", "ABC!"),
        # typographic quotes and dashes
        ("“Hello,” she said — ‘don’t’", "Hello, she said- don't"),
        ("well-known", "well known"),
        ("wait . . . what", "wait… what"),
        ("(aside) text", "aside, text"),
        # emoji, control and format characters, rare punctuation
        ("I ❤️ pizza 🍕!!", "I pizza!"),
        ("👍🏽 great 🇺🇸!", "great!"),
        ("family 👨‍👩‍👧 time", "family time"),
        ("tab\there\x00\x07 bell\u200b", "tab here bell"),
        ("a ¶ b § c ‡ d ※ e ⁂ f", "a b c d e f"),
        ("𝕳𝖊𝖑𝖑𝖔", "Hello"),
        ("Title\n\nBody text", "Title. Body text"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


@pytest.mark.parametrize(
    ("n", "words"),
    [(0, "zero"), (13, "thirteen"), (100, "one hundred"), (999_999, "nine hundred ninety nine thousand nine hundred "
                                                                  "ninety nine"),
     (1_000_001, "one million one"), (10**18, "one" + " zero" * 18)],
)
def test_cardinal(n: int, words: str) -> None:
    assert cardinal(n) == words


@pytest.mark.parametrize(("n", "words"), [(1, "first"), (11, "eleventh"), (12, "twelfth"), (20, "twentieth"),
                                          (103, "one hundred third")])
def test_ordinal(n: int, words: str) -> None:
    assert ordinal(n) == words


@pytest.mark.parametrize(("n", "words"), [(1905, "nineteen oh five"), (1900, "nineteen hundred"),
                                          (2000, "two thousand"), (2099, "twenty ninety nine")])
def test_year(n: int, words: str) -> None:
    assert year(n) == words


@pytest.mark.parametrize("text", ["", " ", "\n\t  ", "🍕🍕", "...", "!!!", "\u200b", "\x00\x01", "«»", "\ufe0f"])
def test_empty_text_is_a_clear_error(text: str) -> None:
    for function in (normalize, text_to_sequences):
        with pytest.raises(FrontendError, match=r"^TEXT: is empty"):
            function(text)


@pytest.mark.parametrize("text", [None, b"bytes", 42])
def test_text_must_be_a_string(text: object) -> None:
    with pytest.raises(FrontendError, match="TEXT: must be a string"):
        text_to_sequences(text)  # type: ignore[arg-type]


def test_text_errors_are_invalid_input_naming_text() -> None:
    assert check_text("Hi.", max_chars=3) == "Hi."
    with pytest.raises(InvalidInput, match=r"^TEXT: has 4 characters; the limit is 3") as caught:
        check_text("Hi!!", max_chars=3)
    assert caught.value.input_name == "TEXT" and isinstance(caught.value, FrontendError)


def test_front_end_does_not_reach_up_into_config() -> None:
    code = ("import sys, tts_triton.text; "
            "print(sorted(m for m in sys.modules if m.startswith('tts_triton.core.config')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_without_max_tokens_a_sentence_stays_whole() -> None:
    sentence = " ".join(["the quick brown fox jumps over the lazy dog"] * 40) + "."
    [whole] = text_to_sequences(sentence)
    assert len(whole) > MAX_TOKENS and len(text_to_sequences(sentence, MAX_TOKENS)) > 1


def test_unsupported_script_alone_is_an_error_and_is_dropped_in_company(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(FrontendError, match="TEXT: has nothing pronounceable"):
        text_to_sequences("ሰላም")  # Ethiopic: espeak-ng has no voice for it
    with caplog.at_level(logging.WARNING):
        [symbols] = phonemize(["ሰላም hello"])
    assert "".join(symbols) == "həlˈoʊ"
    assert "no espeak-ng voice" in caplog.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello there. How are you? Fine!", ["Hello there.", "How are you?", "Fine!"]),
        ("Wait… what?", ["Wait…", "what?"]),
        ("no final punctuation", ["no final punctuation"]),
        ("你好. 世界!", ["你好.", "世界!"]),
        ("three point one four. Done", ["three point one four.", "Done"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith arrived at 10 a.m. He left.", ["doctor Smith arrived at ten eigh em.", "He left."]),
        ("We meet on Jan. 5 at 3 p.m. in the hall.", ["We meet on January fifth at three PM in the hall."]),
        ("It was cold in Jan. Then it snowed.", ["It was cold in January.", "Then it snowed."]),
        ("你好。世界！", ["你好.", "世界!"]),
        ("It was $5. Cheap!", ["It was five dollars.", "Cheap!"]),
    ],
)
def test_abbreviations_and_numbers_do_not_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(normalize(text)) == expected


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Hello, world.", "həlˈoʊ, wˈɜːld."),
        ("你好", "nˈi2 xˈɑu3"),  # third-tone sandhi: ni3 hao3 -> ni2 hao3
        ("妈麻马骂吗", "mˈɑ1 mˈɑ2 mˈɑ3 mˈɑ4 mˈɑ5"),  # the four tones and the neutral tone
        ("我有3个", "wˈo2 jˈiou3 sˈa1n kˈɤ5"),  # a digit next to Chinese is read in Mandarin (san1)
        ("iPhone手机", "ˈaɪ fˈoʊn ʂˈou3 tɕˈi1"),
    ],
)
def test_phonemize(sentence: str, expected: str) -> None:
    [symbols] = phonemize([sentence])
    assert "".join(symbols) == expected
    assert all(s in SYMBOL_TO_ID for s in symbols)


def test_punctuation_becomes_pause_symbols() -> None:
    sentences = split_sentences(normalize("Really? Yes! Well; maybe: no… ok — fine."))
    marks = [s for symbols in phonemize(sentences) for s in symbols if s in PUNCTUATION]
    assert marks == ["?", "!", ";", ":", "…", "-", "."]


def test_unknown_phonemes_are_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        [symbols] = phonemize(["مرحبا"])  # espeak-ng's Arabic has ħ, outside the inventory
    assert symbols and all(s in SYMBOL_TO_ID for s in symbols)
    assert "dropped phonemes outside the inventory" in caplog.text


def test_every_chinese_character_maps_into_the_inventory(caplog: pytest.LogCaptureFixture) -> None:
    chars = "".join(map(chr, [*range(0x3400, 0x4DB6), *range(0x4E00, 0x9FA6), *range(0xF900, 0xFA6E)]))
    sentences = [chars[i : i + 100] for i in range(0, len(chars), 100)] + ["号码" + "1234567890" * 5 + "号"]
    with caplog.at_level(logging.WARNING):
        symbols = phonemize(sentences)
    assert all(symbols)
    assert "dropped" not in caplog.text


MIXED = [
    "Hello 你好 Привет مرحبا שלום 안녕 こんにちは नमस्ते ሰላም 🙂 Ελληνικά!",
    "abc\u0301\u0302 ñ ü ß ø æ œ ł ı",
    "ｶﾀｶﾅ and ｈａｌｆ－ｗｉｄｔｈ！",
    "Zalgo t̸̡̛e̵x̷t̴ and a\u202eb",
    "混合English和中文，还有2024年。",
    "½ ⅔ ① ² Ⅻ ™ ℃ № …",
    "x" * 2000,
]


@pytest.mark.parametrize("text", MIXED)
def test_mixed_scripts_give_valid_sequences(text: str) -> None:
    sequences = text_to_sequences(text, MAX_TOKENS)
    assert sequences
    for ids in sequences:
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID
        assert 2 < len(ids) <= STREAMING.max_tokens
        assert all(0 <= i < N_SYMBOLS for i in ids)
        assert PAD_ID not in ids and BOS_ID not in ids[1:] and EOS_ID not in ids[:-1]


def test_sequences_match_phonemes() -> None:
    text = "It costs $5. 你好，世界！"
    symbols = phonemize(split_sentences(normalize(text)))
    assert [sequence_to_text(ids) for ids in text_to_sequences(text)] == ["".join(s) for s in symbols]
    assert sequence_to_text([BOS_ID, SYMBOL_TO_ID["a"], N_SYMBOLS, EOS_ID, PAD_ID]) == "a\ufffd"
    assert set(TONES) & set(symbols[1])


def _unsplit(pieces: list[list[int]]) -> list[int]:
    """Pieces of one sentence joined again at the word boundaries they were cut at."""
    joined: list[int] = []
    for ids in pieces:
        joined += ([SYMBOL_TO_ID[" "]] if joined else []) + ids[1:-1]
    return joined


@pytest.mark.parametrize(
    ("sentence", "cut_after"),
    [
        (", ".join(["the quick brown fox jumps over the lazy dog"] * 40) + ".", ","),  # clause punctuation
        (" ".join(["the quick brown fox jumps over the lazy dog"] * 40) + ".", None),  # word boundaries
    ],
)
def test_long_sentence_is_split_below_max_tokens(sentence: str, cut_after: str | None) -> None:
    pieces = text_to_sequences(sentence, MAX_TOKENS)
    [symbols] = phonemize([normalize(sentence)])
    assert len(pieces) > 1
    assert all(len(ids) <= STREAMING.max_tokens for ids in pieces)
    assert _unsplit(pieces) == [SYMBOL_TO_ID[s] for s in symbols]
    if cut_after:
        assert all(ids[-2] == SYMBOL_TO_ID[cut_after] for ids in pieces[:-1])


def test_a_giant_word_is_cut_anywhere() -> None:
    pieces = [[s for s, _ in p] for p in _split([(s, None) for s in ["a", " ", *"b" * 1200, " ", "c", "."]], 510)]
    assert [len(p) for p in pieces] == [1, 510, 510, 183]  # the word's tail shares a piece with "c."
    assert pieces[0] == ["a"] and pieces[-1][-3:] == [" ", "c", "."]


def test_ten_thousand_characters() -> None:
    sentences = [
        f"Sentence {i} costs ${i}.{i % 100:02d} on the {i}th day, said Dr. Lee." if i % 3 else f"第{i}句话很好。"
        for i in range(1, 400)
    ]
    text = " ".join(sentences)[:10_000]
    start = time.perf_counter()
    sequences = text_to_sequences(text, MAX_TOKENS)
    elapsed = time.perf_counter() - start
    assert elapsed < 5, f"{elapsed:.1f} s for 10,000 characters"
    assert all(len(ids) <= STREAMING.max_tokens for ids in sequences)
    # In order: the whole text gives the same sequences as its sentences one by one.
    expected = [ids for sentence in split_sentences(normalize(text)) for ids in text_to_sequences(sentence, MAX_TOKENS)]
    assert sequences == expected
    assert len(sequences) == text.count("Lee.") + text.count("。") + 1  # every sentence, and the cut-off tail


def test_concurrent_calls_match_serial_calls() -> None:
    texts = ["Hello, world. It costs $5.", "你好，世界！我有3个苹果。", "Привет, мир! Dr. Who at 10:30.", *MIXED[:3]]
    texts *= 8
    serial = [text_to_sequences(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(text_to_sequences, texts)) == serial


def test_clock_abbreviations_are_read_as_letters() -> None:
    """a.m. is said /eɪ ɛm/ (not /aɪ ɛm/), p.m. as espeak-ng's initialism /piːɛm/."""
    [symbols] = phonemize(split_sentences(normalize("At 9 a.m. or 5 p.m. today")))
    spoken = "".join(symbols)
    assert "ˈeɪ ˈɛm" in spoken and "pˌiːˈɛm" in spoken and "aɪ ˈɛm" not in spoken


PLANNED = [
    "Hello there, Mr. Smith. It costs $5.50 in the house of the rising sun at 10:30 a.m. Today!",
    "He did not do it for them; the U.S.A. and NASA… ok — fine?",
    "你好，世界！我有3个苹果。 Привет, мир! Dr. Who at 10:30.",
    "Emoji 😀 between words, and “quotes” ‘here’ — café naïve e\u0301t\u00e9 ﬁne.",
    "I'd rather, don't you think, go on the 21st at 5km/h for ~3 hours #1.",
    *MIXED[:3],
]


def _check_plan(text: str, sentences: list[Sentence]) -> None:
    for s in sentences:
        owner = [None] * len(s.ids)
        previous = None
        for w in s.words:
            assert 0 < w.first < w.last < len(s.ids), w  # inside BOS ... EOS, never empty
            assert 0 <= w.start < w.end <= len(text) and text[w.start : w.end].strip(), w
            assert s.ids[w.first] != SYMBOL_TO_ID[" "] and s.ids[w.last - 1] != SYMBOL_TO_ID[" "]
            for i in range(w.first, w.last):
                assert owner[i] is None, f"id {i} belongs to {owner[i]} and {w}"
                owner[i] = w
            if previous is not None:  # monotonic in both the ids and the TEXT
                assert previous.last <= w.first and previous.start <= w.start, (previous, w)
            previous = w
        # Only boundaries, pauses, BOS and EOS are left to no word.
        assert all(SYMBOLS[i] in (" ", "^", "$", *PUNCTUATION) for i, o in zip(s.ids, owner, strict=True) if o is None)


@pytest.mark.parametrize("text", PLANNED)
def test_plan_word_spans_are_exact(text: str) -> None:
    sentences = plan_text(text)
    assert [s.ids for s in sentences] == text_to_sequences(text)
    _check_plan(text, sentences)
    for s in sentences:
        # Re-reading the words' texts, with the pauses between them, gives the same ids.
        parts, i = [], 1
        for w in s.words:
            parts += [SYMBOLS[k] for k in s.ids[i : w.first] if SYMBOLS[k] in PUNCTUATION]
            parts.append(" " + w.text)
            i = w.last
        parts += [SYMBOLS[k] for k in s.ids[i:-1] if SYMBOLS[k] in PUNCTUATION]
        assert text_to_sequences("".join(parts)) == [s.ids], "".join(parts)


def test_plan_points_words_at_their_source() -> None:
    text = "In the house, it costs $5.50 at 10:30 a.m. Today."
    words = [(w.text, text[w.start : w.end]) for s in plan_text(text) for w in s.words]
    assert words == [("In", "In"), ("the", "the"), ("house", "house"), ("it", "it"), ("costs", "costs"),
                     *((w, "$5.50") for w in ("five", "dollars", "and", "fifty", "cents")), ("at", "at"),
                     ("ten", "10:30"), ("thirty", "10:30"), ("eigh", "a.m"), ("em", "a.m"), ("Today", "Today")]
    # espeak-ng joins "in the" into one word /ɪnðə/: "the" owns /ðə/.
    first = plan_text(text)[0]
    assert [sequence_to_text(first.ids[w.first : w.last]) for w in first.words[:3]] == ["ɪn", "ðə", "hˈaʊs"]


def test_plan_cuts_long_sentences_like_text_to_sequences() -> None:
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 40) + ". Then " + "b" * 3000 + " end."
    sentences = plan_text(text, MAX_TOKENS)
    assert [s.ids for s in sentences] == text_to_sequences(text, MAX_TOKENS) and len(sentences) > 2
    _check_plan(text, sentences)
    giant = [w for s in sentences for w in s.words if w.text == "b" * 3000]
    assert len(giant) > 1  # a word cut in two is in both pieces, with the same source span
    assert len({(w.start, w.end) for w in giant}) == 1


def test_a_word_that_reads_to_nothing_twice() -> None:
    """A word espeak-ng reads to no phonemes (lone combining marks), in a clause whose words it joins: the
    second request finds it remembered as empty."""
    text = "in the house \u0301\u0301 of"
    assert plan_text(text) == plan_text(text)
    assert [w.text for s in plan_text(text) for w in s.words] == ["in", "the", "house", "of"]


def test_random_text_plans_hold_their_invariants() -> None:
    rnd = random.Random(0)
    alphabet = ("aZ09 .,;:!?-—$€£%&@#/~'\"“”…\n\t()e\u0301ﬁ½한\u1161你好", "1,000", "3.5", "10:30 am", "a.m.", "Mr.",
                "etc.", "U.S.A.", "www.x.com", "21st", "5km", "°C", "03/14/2025", "1990s", "123-4567", "v3.1.2", "the")
    symbols = [*alphabet[0], *alphabet[1:]]
    for _ in range(120):
        text = "".join(rnd.choice(symbols) for _ in range(rnd.randint(1, 30)))
        try:
            sentences = plan_text(text)
        except InvalidInput:
            continue
        _check_plan(text, sentences)
