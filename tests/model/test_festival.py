"""The festival renderer (HTS ``slt`` through hts_engine): a lexicon addendum said as given, text that is not
Scheme-safe spoken, the engine's speed, half-tone and F0-spread controls, festival's failures as FestivalError."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tts_triton.data import festival

pytestmark = pytest.mark.skipif(shutil.which("festival") is None or shutil.which("hts_engine") is None,
                                reason="festival or hts_engine not on PATH")
BLORF = {"blorf": ["b", "l", "ao1", "r", "f"]}


def test_the_hts_voice_is_installed() -> None:
    assert festival.HTS_SLT in festival.voices()


def test_a_lexicon_addendum_is_said_and_quotes_and_backslashes_are_text() -> None:
    said = festival.synthesize('She said "blorf" \\ twice.', lexicon=BLORF)
    assert said.rate == 32000 and said.samples.dtype.name == "int16" and len(said.samples) > said.rate // 2
    assert "b l ao r f" in " ".join(said.segments)
    assert said.segments[0] == said.segments[-1] == "pau"


def test_speed_shortens_the_utterance() -> None:
    text = "The weather will be cloudy tomorrow afternoon."
    lengths = [len(festival.synthesize(text, controls=festival.HtsControls(speed=speed)).samples)
               for speed in (0.8, 1.0, 1.3)]
    assert lengths[0] > lengths[1] * 1.1 and lengths[2] < lengths[1] / 1.1, lengths
    with pytest.raises(ValueError, match="speed"):
        festival.HtsControls(speed=0)


def test_half_tones_move_the_f0_and_the_gv_weight_its_spread() -> None:
    pyworld = pytest.importorskip("pyworld")

    def voiced_f0(controls: festival.HtsControls) -> np.ndarray:
        said = festival.synthesize("The children watched the boats sail slowly past the old lighthouse.",
                                   controls=controls)
        x = said.samples.astype(np.float64) / 32768.0
        f0, _ = pyworld.harvest(x, said.rate, f0_floor=60.0, f0_ceil=700.0)
        return f0[f0 > 0]

    plain, up = voiced_f0(festival.AS_TRAINED), voiced_f0(festival.HtsControls(half_tones=4.0))
    assert 2 ** (3.5 / 12) < np.median(up) / np.median(plain) < 2 ** (4.5 / 12)
    wide = voiced_f0(festival.HtsControls(f0_gv_weight=1.6))
    assert np.std(np.log2(wide)) > np.std(np.log2(plain)) * 1.1
    with pytest.raises(ValueError, match="half_tones"):
        festival.HtsControls(half_tones=13.0)


def test_an_unknown_voice_is_a_festival_error() -> None:
    with pytest.raises(festival.FestivalError, match="nosuchvoice"):
        festival.synthesize("Hello.", voice="nosuchvoice")


def test_a_clitic_keeps_festivals_own_pronunciation() -> None:
    # the front end's addendum splits "Let's" into let + 's; festival's rule for 's fails on an entry of its own
    said = festival.synthesize("Let's meet at noon.", lexicon={"let": ["l", "eh1", "t"], "'s": ["s"]})
    assert " ".join(said.segments).startswith("pau l eh t s m iy t"), said.segments
