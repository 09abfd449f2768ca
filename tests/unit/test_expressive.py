"""Expressive speech as data: the HTS teacher's controls per emotion, the plan's pitch variants, the voice bank's
pitch axes, and the bars evaluate.expressive checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tts_triton.core import audio
from tts_triton.core.voices import VoiceBank, from_styles
from tts_triton.data import festival
from tts_triton.data.corpus import conditions, utterance_id
from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, HTS_GV_FLOOR, PITCH_ORDER, Voice, hts_controls
from tts_triton.evaluate.expressive import BARS, MODEL, TEACHER, Condition, checks, load_clips, save_clips


def test_the_hts_controls_follow_the_emotion_table() -> None:
    controls = {name: hts_controls(EMOTIONS[name]) for name in PITCH_ORDER}
    tones = [c.half_tones for c in controls.values()]
    assert tones == sorted(tones) and controls["neutral"] == festival.AS_TRAINED
    assert controls["sad"].speed < 1.0 < controls["happy"].speed < controls["angry"].speed
    assert controls["sad"].f0_gv_weight == HTS_GV_FLOOR  # never flattened below the floor
    assert max(controls.values(), key=lambda c: c.f0_gv_weight) is controls["surprised"]
    shifted = hts_controls(EMOTIONS["happy"], semitones=-4.0)
    assert shifted.half_tones == pytest.approx(controls["happy"].half_tones - 4.0)
    assert festival.HtsControls(2.0, 1.5, 0.8).arguments() == ["-fm", "2", "-jf", "1.5", "-r", "0.8"]
    for bad in ({"speed": 0.0}, {"half_tones": -13.0}, {"f0_gv_weight": -1.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            festival.HtsControls(**bad)


def test_pitch_variants_are_conditions_of_their_own_for_the_hts_voice_only() -> None:
    chosen = conditions(["slt", "m1"], ["neutral", "sad"])
    assert [c for c in chosen if c[2]] == [("slt", "neutral", st) for st in CORPUS_VOICES["slt"].pitch_variants]
    assert conditions(["slt"], ["sad"]) == [("slt", "sad", 0.0)]  # variants are of neutral speech
    assert utterance_id("s00001", "slt", "neutral", 4.0) == "s00001-slt-neutral+4st"
    assert utterance_id("s00001", "slt", "neutral") == "s00001-slt-neutral"
    with pytest.raises(ValueError, match="festival"):
        Voice("x", "espeak-ng", "en-us", "male", pitch_variants=(4.0,))


def test_the_bank_renders_a_shift_along_its_axis_within_the_span() -> None:
    bank = from_styles({("slt", "neutral"): np.zeros(3), ("m8", "neutral"): np.ones(3)}, "slt", "neutral")
    assert bank.pitch_axis("slt") is None and bank.pitch_style(2.0, "slt").warp == 2.0  # no axes: the warp
    bank.pitch_axes["slt"], bank.pitch_span = [0.1, 0.0, -0.1], 4.0
    within = bank.pitch_style(3.0, "slt")
    assert np.allclose(within.offset, [0.3, 0.0, -0.3]) and within.warp == 0.0
    beyond = bank.pitch_style(-7.0, "slt")
    assert np.allclose(beyond.offset, [-0.4, 0.0, 0.4]) and beyond.warp == pytest.approx(-3.0)
    assert bank.pitch_style(3.0, "m8").offset is None and bank.pitch_style(3.0, "m8").warp == 3.0
    assert np.allclose(bank.pitch_style(1.0, None).offset, [0.1, 0.0, -0.1])  # reference audio: the default's axis
    assert bank.pitch_style(0.0, "slt").offset is None
    again = VoiceBank.from_json(bank.to_json())
    assert again.pitch_axes == bank.pitch_axes and again.pitch_span == 4.0
    assert "pitch_axes" not in VoiceBank.from_json(from_styles({("a", "n"): np.zeros(2)}, "a", "n").to_json()).to_dict()


def _row(mos: float, f0: float, spread: float = 3.0, seconds: float = 3.0, wer: float = 0.0,
         sentences: int = 30) -> dict[str, float]:
    return {"distillmos": mos, "f0_median_hz": f0, "f0_spread_st": spread, "seconds": seconds, "whisper_wer": wer,
            "sentences": sentences}


def test_the_bars_are_checked_on_the_model_rows() -> None:
    rows = {(Condition("slt", "neutral").label, MODEL): _row(3.4, 170.0),
            (Condition("slt", "happy").label, MODEL): _row(3.2, 200.0),
            (Condition("slt", "sad").label, MODEL): _row(3.2, 150.0, spread=2.0, seconds=3.5),
            (Condition("slt", "angry").label, MODEL): _row(3.2, 180.0),
            (Condition("slt", "surprised").label, MODEL): _row(3.15, 220.0, spread=4.0),
            (Condition("slt", "neutral", 4.0).label, MODEL): _row(3.1, 170.0 * 2 ** (4 / 12)),
            (Condition("slt", "neutral", -4.0).label, MODEL): _row(3.1, 170.0 * 2 ** (-4 / 12) * 1.05),
            (Condition("m8", "happy").label, MODEL): _row(2.95, 130.0)}
    verdicts = {bar: met for bar, met, _ in checks(rows, "slt")}
    assert set(verdicts) == set(BARS) and all(verdicts.values())
    rows[Condition("slt", "neutral", -4.0).label, MODEL] = _row(3.1, 170.0 * 2 ** (-4 / 12) * 1.12)
    rows[Condition("slt", "happy").label, MODEL] = _row(3.0, 180.0, wer=0.05)
    rows[Condition("m8", "happy").label, MODEL] = _row(2.8, 130.0)
    failed = {bar for bar, met, _ in checks(rows, "slt") if not met}
    assert failed == {BARS[0], BARS[1], BARS[2], BARS[4], BARS[5]}


def test_a_teacher_below_the_bar_on_the_same_sentences_sets_the_bound_for_its_condition() -> None:
    rows = {(Condition("slt", "neutral").label, MODEL): _row(3.4, 170.0),
            (Condition("slt", "happy").label, MODEL): _row(2.95, 200.0),
            (Condition("slt", "happy").label, TEACHER): _row(3.05, 200.0),
            (Condition("slt", "sad").label, MODEL): _row(3.2, 150.0, spread=2.0, seconds=3.5),
            (Condition("slt", "surprised").label, MODEL): _row(3.15, 220.0, spread=4.0)}
    naturalness = checks(rows, "slt")[0]
    assert naturalness[1] and "happy 2.95 (teacher's bound 2.85)" in naturalness[2]
    rows[Condition("slt", "happy").label, MODEL] = _row(2.84, 200.0)
    assert not checks(rows, "slt")[0][1]
    rows[Condition("slt", "happy").label, MODEL] = _row(2.95, 200.0)
    rows[Condition("slt", "happy").label, TEACHER] = _row(3.05, 200.0, sentences=10)  # other sentences: no bound
    assert not checks(rows, "slt")[0][1]
    rows[Condition("slt", "happy").label, MODEL] = _row(3.05, 200.0)
    rows[Condition("slt", "happy").label, TEACHER] = _row(3.2, 200.0)  # a teacher above the bar lowers nothing
    assert not checks(rows, "slt")[0][1]


def test_saved_clips_come_back_at_the_sample_rate_as_they_were(tmp_path: Path) -> None:
    t = np.arange(audio.SAMPLE_RATE // 2) / audio.SAMPLE_RATE
    tone = (0.5 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)
    save_clips(tmp_path, {"slt happy": [tone, tone[:1000]]})
    back = load_clips(tmp_path)["slt happy"]
    assert len(back[0]) == len(tone) and abs(len(back[1]) - 1000) <= 1  # 16 kHz holds 725.6 samples of it
    middle = slice(200, -200)  # the resamplers' edges
    assert audio.snr_db(tone[middle], back[0][middle]) > 30.0
