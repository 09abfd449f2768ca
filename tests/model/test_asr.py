"""The ASR round trip: word edit distance, normalization, the held-out set, and real PocketSphinx decodes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tts_triton.data import sentences as generator
from tts_triton.evaluate.asr import edit_distance, transcribe, wer, words
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES

CLEAR = "Please close the window before you leave the house."


@pytest.mark.parametrize(("ref", "hyp", "distance"), [
    ("", "", 0), ("a b c", "a b c", 0), ("a b c", "", 3), ("", "a b", 2),
    ("a b c", "a x c", 1),  # one substitution
    ("a b c", "a c", 1),  # one deletion
    ("a b c", "a b b c", 1),  # one insertion
    ("a b c d", "b c d e", 2),  # deletion + insertion beats four substitutions
    ("the cat sat", "sat the cat", 2),
])
def test_edit_distance(ref: str, hyp: str, distance: int) -> None:
    assert edit_distance(ref.split(), hyp.split()) == distance
    assert edit_distance(hyp.split(), ref.split()) == distance


def test_words_normalize_case_punctuation_and_numbers() -> None:
    assert words("Hello, World!") == ["hello", "world"]
    assert words("Don't stop.") == ["don't", "stop"]
    assert words("It costs $25 at 7:30.") == ["it", "costs", "twenty", "five", "dollars", "at", "seven", "thirty"]
    assert words("Dr. Lee has 3 cats") == ["doctor", "lee", "has", "three", "cats"]
    assert words("...") == []


def test_wer() -> None:
    assert wer("There are 7 days in a week.", "there are seven days in a week") == 0.0
    assert wer("a b c d", "a x c d") == 0.25
    assert wer("a b", "x y z w") == 2.0  # insertions count: WER may exceed 1
    assert wer(CLEAR, "banana purple telescope yesterday river quietly orange") >= 0.9
    with pytest.raises(ValueError, match="no words"):
        wer("!", "x")


def test_heldout_set() -> None:
    assert len(HELDOUT_SENTENCES) >= 60
    assert len({s.lower() for s in HELDOUT_SENTENCES}) == len(HELDOUT_SENTENCES)
    assert all(6 <= len(words(s)) <= 14 and s[0].isupper() and s[-1] in ".?!" for s in HELDOUT_SENTENCES)


def test_heldout_sentences_are_never_generated() -> None:
    """None is in the corpus (the default seed) nor in 1000 other seeds' output; and each holds a witness word
    that neither the generator's source (its word lists) nor that output contains, so no seed can produce it:
    the generator only assembles words of its lists (and their inflections, which are in the output)."""
    produced = [s.text for s in generator.generate()]
    produced += [s.text for seed in range(1000) for s in generator.generate(40, seed)]
    assert not {s.lower() for s in HELDOUT_SENTENCES} & {s.lower() for s in produced}
    source = Path(generator.__file__).read_text().lower()
    seen = {w for token in {t for s in produced for t in s.lower().split()} for w in words(token)}
    for sentence in HELDOUT_SENTENCES:
        witnesses = [w for w in words(sentence) if w not in seen and not re.search(rf"\b{re.escape(w)}\b", source)]
        assert witnesses, sentence


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not on PATH")
def test_pocketsphinx_decodes_espeak_speech() -> None:
    """A real decode of the teacher's voice understands most of a clear sentence; the same audio reversed in
    time (speech-like, meaningless) does not."""
    from tts_triton.core import audio
    from tts_triton.data.prosody import EMOTIONS, VOICES, render

    speech = render(CLEAR, VOICES["m1"], EMOTIONS["neutral"])
    assert wer(CLEAR, transcribe(speech, audio.SAMPLE_RATE)) < 0.8
    assert wer(CLEAR, transcribe(np.ascontiguousarray(speech[::-1]), audio.SAMPLE_RATE)) > 0.8
