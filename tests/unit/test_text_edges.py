"""The rough edges new users hit (issue 36), pure logic: readings of signs, Roman numerals, slashes, cents, feet and
inches, units and ranges; the language check; the pronunciation lexicon; the streamed resampling to
OUTPUT_SAMPLE_RATE; the streamed WAV header; the pitch control's energy."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import wave
from pathlib import Path

import numpy as np
import pytest
import soxr

from tts_triton.client import InvalidInputError, build_request
from tts_triton.core import audio
from tts_triton.core.contract import OUTPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATES
from tts_triton.errors import InvalidInput
from tts_triton.serving.controls import frame_energy, shift_pitch
from tts_triton.serving.pipeline import Chunk
from tts_triton.serving.resample import resampled
from tts_triton.serving.service import output_rate
from tts_triton.text import normalize, phonemize, plan_text
from tts_triton.text.language import NotEnglish, check_english, detect
from tts_triton.text.lexicon import LEXICON_ENV, Lexicon, LexiconError, current
from tts_triton.text.roman import roman_value


@pytest.mark.parametrize(("text", "expected"), [
    # signed numbers and temperatures
    ("-10°C outside", "minus ten degrees Celsius outside"),
    ("It is −5 °F.", "It is minus five degrees Fahrenheit."),  # U+2212, the minus sign
    ("from -3 to +4", "from minus three to plus four"),
    # Roman numerals: wars and numbering words as cardinals, names as ordinals, never the pronoun
    ("World War II ended; World War I did too.", "World War two ended; World War one did too."),
    ("Chapter IV, Part III, Volume II, Act V, Book IX", "Chapter four, Part three, Volume two, Act five, Book nine"),
    ("Henry VIII met Louis XIV and Elizabeth II.",
     "Henry the eighth met Louis the fourteenth and Elizabeth the second."),
    ("Then I left. John and I stayed.", "Then I left. John and I stayed."),
    ("Washington DC has a CD shop, Vitamin C and an IV drip.",
     "Washington DC has a CD shop, Vitamin C and an IV drip."),
    ("Type II diabetes", "Type two diabetes"),
    # slashes
    ("10 / 2", "ten divided by two"),
    ("in km/h and m/s", "in kilometers per hour and meters per second"),
    ("and/or", "and or"),
    # cents, feet and inches
    ("50¢ and 1¢", "fifty cents and one cent"),
    ("6'2\" tall, 5′11″ too", "six feet two inches tall, five feet eleven inches too"),
    ("a 12\" pizza", "a twelve inches pizza"),
    ('He said "take 5" and left', "He said take five and left"),  # a closing quote, not inches
    # units, singular and plural
    ("1 km, 5 kg, 2 GB, 1 MB, 100 mph, 5 ml, 1 m", "one kilometer, five kilograms, two gigabytes, one megabyte, "
                                                   "one hundred miles per hour, five milliliters, one meter"),
    ("90 km/h, 3 GHz, 250 ms, 1%, 45%", "ninety kilometers per hour, three gigahertz, two hundred fifty "
                                        "milliseconds, one percent, forty five percent"),
    ("It was 5 m long and 5 men came.", "It was five meters long and five men came."),
    # ranges, and what is not one
    ("10-20 people on pages 10–20, 3~5 times", "ten to twenty people on pages ten to twenty, three to five times"),
    ("3-4 pm", "three to four PM"),
    ("call 555-1234 on 2024-11-05", "call five five five, one two three four on November fifth, twenty twenty four"),
])
def test_readings(text: str, expected: str) -> None:
    assert normalize(text) == expected


@pytest.mark.parametrize(("numeral", "value"), [("I", 1), ("IV", 4), ("XIV", 14), ("XLII", 42), ("MCMXCIV", 1994),
                                                ("IIII", None), ("VX", None), ("", None), ("iv", None)])
def test_roman_value(numeral: str, value: int | None) -> None:
    assert roman_value(numeral) == value


@pytest.mark.parametrize(("text", "language"), [
    ("Bonjour, je m'appelle Marie et j'habite à Paris.", "French"),
    ("Guten Tag, ich heiße Anna und ich wohne in Berlin.", "German"),
    ("Hola, ¿cómo estás? Me llamo Juan y vivo en Madrid.", "Spanish"),
    ("Ciao, come stai? Io sono molto felice di vederti.", "Italian"),
    ("Привет, как дела? Меня зовут Иван.", "Russian"),
    ("你好，世界！我有三个苹果。", "Chinese"),
    ("今日はいい天気ですね。", "Japanese"),
    # English, with foreign words or too short to tell
    ("He said je ne sais quoi and left the room.", "English"),
    ("Casa de la Luna is a restaurant in the city.", "English"),
    ("The die is cast, and the war was long.", "English"),
    ("It costs $5. 你好，世界！", "English"),
    ("Merci beaucoup", "English"),
    ("12345 !!!", "English"),
    ("<speak>Bonjour, je suis <break time='1s'/> très content et je vous remercie.</speak>", "French"),
])
def test_language(text: str, language: str) -> None:
    assert detect(text)[0] == language


def test_non_english_is_invalid_text_naming_the_language() -> None:
    with pytest.raises(NotEnglish) as caught:
        check_english("Le chat est noir et le chien est blanc.")
    assert isinstance(caught.value, InvalidInput) and caught.value.input_name == "TEXT"
    assert str(caught.value).startswith("TEXT: reads as French, not English") and caught.value.language == "French"
    check_english("The cat is black and the dog is white.")


LEXICON = "# names\nzorblax\t/kˈæt/\nNguyen\twin\nUS\tyou ess\n\nTriton\tTRY ton\n"


@pytest.fixture
def lexicon_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lexicon.tsv"
    path.write_text(LEXICON, encoding="utf-8")
    monkeypatch.setenv(LEXICON_ENV, str(path))
    return path


def test_lexicon_words_are_read_as_their_entries(lexicon_path: Path) -> None:
    said, cat, win, us = phonemize(["Say zorblax now", "Say cat now", "Mr Nguyen", "the US and us"])
    assert said == cat  # the IPA entry gives espeak-ng's own symbols for "cat"
    assert win == phonemize(["Mr win"])[0]  # a respelling is read as English
    assert us[:-3] != phonemize(["the us and us"])[0][:-3] and us[-3:] == phonemize(["us"])[0]  # case as written
    assert phonemize(["ZORBLAX"])[0] == phonemize(["cat"])[0]  # a lowercase entry matches any case
    plan = plan_text("Say zorblax. Nguyen's friend Nguyen.")
    assert [(w.text, w.start, w.end) for s in plan for w in s.words] == [
        ("Say", 0, 3), ("zorblax", 4, 11), ("Nguyen's", 13, 21), ("friend", 22, 28), ("Nguyen", 29, 35)]
    assert len(plan) == 2  # the sentences stay apart


def test_lexicon_is_read_again_when_the_file_changes(lexicon_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert current() is not None and phonemize(["zorblax"])[0] == phonemize(["cat"])[0]
    lexicon_path.write_text("zorblax\tdog\n", encoding="utf-8")
    assert phonemize(["zorblax"])[0] == phonemize(["dog"])[0]
    with caplog.at_level(logging.WARNING, logger="tts_triton.text.lexicon"):
        lexicon_path.write_text("zorblax\t/kˈæt/\nbroken line\n", encoding="utf-8")  # a broken edit is not taken
        assert phonemize(["zorblax"])[0] == phonemize(["dog"])[0]
    assert "line 2: expected WORD<TAB>PRONUNCIATION" in caplog.text and "keeping the lexicon read before" in caplog.text
    os.environ.pop(LEXICON_ENV)
    assert current() is None


@pytest.mark.parametrize(("text", "problem"), [
    ("ok\tfine\nbad line\n", "line 2: expected WORD<TAB>PRONUNCIATION, got 'bad line'"),
    ("a\tb\tc\n", "line 1: expected WORD<TAB>PRONUNCIATION"),
    ("Wi-Fi\twhy fy\n", "line 1: 'Wi-Fi' is not one word of letters"),
    ("cat\t/kæt\n", "line 1: an IPA pronunciation goes between two slashes"),
    ("cat\t/k#t/\n", "line 1: /k#t/: the IPA symbol '#' (U+0023 NUMBER SIGN) has no counterpart"),
    ("cat\tk4t\n", "line 1: the respelling 'k4t' must be words of letters"),
    ("cat\tkat\n\ncat\tcot\n", "line 3: 'cat' is listed twice (first on line 1)"),
])
def test_lexicon_errors_name_line_and_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "lexicon.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LexiconError) as caught:
        Lexicon.load(path)
    assert str(caught.value).startswith(f"lexicon {path} ") and problem in str(caught.value)


def test_lexicon_file_problems(tmp_path: Path) -> None:
    with pytest.raises(LexiconError, match="No such file"):
        Lexicon.load(tmp_path / "missing.tsv")
    (tmp_path / "latin1.tsv").write_bytes("café\tkafay\n".encode("latin-1"))
    with pytest.raises(LexiconError, match="not UTF-8"):
        Lexicon.load(tmp_path / "latin1.tsv")


def chunks_of(samples: np.ndarray, sizes: list[int]) -> list[Chunk]:
    cuts = np.cumsum([0, *sizes])
    return [Chunk(samples[a:b], np.zeros((0, 128), np.float32), 0) for a, b in zip(cuts, cuts[1:], strict=False)]


@pytest.mark.parametrize("marked", [False, True])
@pytest.mark.parametrize("rate", [8000, 24000, 48000])
def test_streamed_resampling_is_gapless(rate: int, marked: bool) -> None:
    samples = np.sin(np.arange(22050) * 2 * np.pi * 440 / 22050).astype(np.float32) * 0.5

    async def run() -> list[Chunk]:
        async def source():
            chunks = chunks_of(samples, [256 * 12, 256 * 32, 0, 256 * 20, 22050 - 256 * 64])
            chunks[-1].last = marked
            for chunk in chunks:
                yield chunk
        return [c async for c in resampled(source(), rate)]

    out = asyncio.run(run())
    # unmarked, one chunk more carries the filter's last samples; marked, the last chunk takes them and stays last
    assert {c.sample_rate for c in out} == {rate} and len(out) == (5 if marked else 6)
    assert [c.last for c in out] == [False] * 4 + [marked] + [False] * (not marked)
    whole = np.concatenate([c.audio for c in out])
    assert abs(len(whole) - 22050 * rate / 22050) <= 1
    np.testing.assert_allclose(whole, soxr.resample(samples, 22050, rate, quality="HQ"), atol=1e-4)


def test_output_rate_is_checked() -> None:
    assert output_rate({}) == audio.SAMPLE_RATE
    assert output_rate({OUTPUT_SAMPLE_RATE: np.array([8000], np.int32)}) == 8000
    for bad in (np.array([11025], np.int32), np.array([8000.0], np.float32), np.array([8000, 8000], np.int32)):
        with pytest.raises(InvalidInput) as caught:
            output_rate({OUTPUT_SAMPLE_RATE: bad})
        assert caught.value.input_name == OUTPUT_SAMPLE_RATE
    assert build_request("Hi.", sample_rate=48000).tensors[OUTPUT_SAMPLE_RATE].tolist() == [48000]
    with pytest.raises(InvalidInputError, match="OUTPUT_SAMPLE_RATE: expected one of 8000"):
        build_request("Hi.", sample_rate=11025)
    assert 22050 in OUTPUT_SAMPLE_RATES and 24000 in OUTPUT_SAMPLE_RATES


def test_streamed_wav_header_opens_in_standard_readers() -> None:
    import soundfile as sf

    samples = np.linspace(-0.5, 0.5, 1000, dtype=np.float32)
    data = audio.wav_header(16000) + audio.pcm16(samples)
    with wave.open(io.BytesIO(data)) as reader:
        assert reader.getframerate() == 16000
        read = np.frombuffer(reader.readframes(10_000), "<i2")
    assert len(read) == 1000
    exact = audio.wav_header(16000, 2000) + audio.pcm16(samples)
    assert len(sf.read(io.BytesIO(exact))[0]) == 1000
    with wave.open(io.BytesIO(exact)) as reader:
        assert reader.getnframes() == 1000


def test_pitch_shift_keeps_each_frames_energy() -> None:
    rng = np.random.default_rng(0)
    mel = (rng.standard_normal((40, 128)) - 4.0).astype(np.float32)
    for semitones in (2, -2, 6, -6, 12, -12):
        shifted = shift_pitch(mel, semitones)
        np.testing.assert_allclose(frame_energy(shifted), frame_energy(mel), rtol=1e-4)
        halves = np.concatenate([shift_pitch(mel[:17], semitones), shift_pitch(mel[17:], semitones)])
        np.testing.assert_allclose(halves, shifted, atol=1e-5)  # frame by frame: streamed equals one-shot


#: Written form -> its right reading, then the misreadings it had (issue 36) or might have.
HEARD = {
    "It is -10°C outside.": ["it is minus ten degrees celsius outside", "it is ten degrees celsius outside"],
    "World War II ended.": ["world war two ended", "world war roman two ended", "world war i i ended"],
    "Read Chapter IV tonight.": ["read chapter four tonight", "read chapter roman four tonight",
                                 "read chapter i v tonight"],
    "Henry VIII had six wives.": ["henry the eighth had six wives", "henry roman eight had six wives",
                                  "henry v i i i had six wives"],
    "It costs 50¢.": ["it costs fifty cents", "it costs fifty"],
    "He is 6'2\" tall.": ["he is six feet two inches tall", "he is six two tall"],
    "Drive at 90 km/h.": ["drive at ninety kilometers per hour", "drive at ninety k m h"],
    "Invite 10-20 people.": ["invite ten to twenty people", "invite ten twenty people"],
    "Compute 10 / 2 now.": ["compute ten divided by two now", "compute ten two now"],
}


@pytest.mark.skipif(not __import__("shutil").which("flite"), reason="flite not on PATH")
def test_readings_are_heard_right() -> None:
    """ASR round trip of each reading: flite speaks the front end's normalized text, and PocketSphinx, given the
    right reading and the misreadings to choose from, hears the right one (a free transcription of one
    synthetic sentence is too unsure to tell one word)."""
    from tts_triton.evaluate.asr import choose, flite_render

    for text, readings in HEARD.items():
        rate, samples = flite_render(normalize(text))
        assert choose(samples, rate, readings) == readings[0], text
