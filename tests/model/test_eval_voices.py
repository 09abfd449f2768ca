"""Evaluating any corpus voice (slt included): the teachers' reference clips and presets, the ASR round trip's
report with its teacher column and MCD, the emotion-order check, and the evaluate command's voice checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tts_triton.core.voices import from_styles
from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, PITCH_ORDER
from tts_triton.evaluate import cli
from tts_triton.evaluate.asr import COPY, MODEL, TEACHER, AsrResult, asr_json, asr_markdown
from tts_triton.evaluate.emotion_order import EmotionCheck, emotion_markdown
from tts_triton.export import voice_bank

needs_teachers = pytest.mark.skipif(shutil.which("flite") is None or shutil.which("espeak-ng") is None,
                                    reason="flite and espeak-ng must be on PATH")
TEXT = "Please close the window before you leave."
#: how the reports name slt's teachers (flite for its emotions, festival's HTS voice for neutral speech)
SLT = "festival cmu_us_slt_arctic_hts"


def test_voice_names_read_the_voice_table() -> None:
    assert voice_bank.voice_names(None) is None  # the checkpoint's own voices
    assert voice_bank.voice_names("all") == list(CORPUS_VOICES) and "slt" in CORPUS_VOICES
    assert voice_bank.voice_names("f1,slt") == ["f1", "slt"]
    with pytest.raises(ValueError, match="nope.*known: .*slt"):
        voice_bank.voice_names("f1,nope")
    with pytest.raises(ValueError, match="nope.*known: .*slt"):
        voice_bank.teacher_references([TEXT], ["nope"])
    with pytest.raises(SystemExit):
        voice_bank.main(["--voices", "f1,nope", "--out", "unused.json"])


@needs_teachers
def test_slt_presets_come_from_flite_clips_per_emotion(tiny_checkpoint: Any) -> None:
    clips = voice_bank.teacher_references([TEXT], ["f1", "slt"])
    assert set(clips) == {(v, e) for v in ("f1", "slt") for e in EMOTIONS}
    assert len(clips["slt", "sad"][0]) > 1.2 * len(clips["slt", "happy"][0])  # flite's duration_stretch
    bank = voice_bank.build_voice_bank(tiny_checkpoint, clips)
    assert bank.voices == ["f1", "slt"] and bank.default_voice == "f1"  # the tiny checkpoint never learned slt
    assert not np.allclose(bank.style("slt", "sad"), bank.style("slt", "happy"))
    assert not np.allclose(bank.style("slt", "neutral"), bank.style("f1", "neutral"))


def test_asr_report_names_each_voices_teacher_and_its_mcd() -> None:
    sentences = ["Please close the window.", "It is late."]
    result = AsrResult(sentences, "neutral",
                       {MODEL: {"slt": ["please close the window", "it is late"], "f1": ["please close", "late"]},
                        TEACHER: {"slt": ["please close window", "it is late"], "f1": ["please close the window",
                                                                                      "it is late"]}},
                       1.0, {"slt": [4.0, 5.0], "f1": [6.0, 7.0]})
    text = "\n".join(asr_markdown(result))
    assert f"| slt | {SLT} | 0.000 | 0.125 | 0.00 | 4.50 |" in text
    assert "| f1 | espeak-ng en-us+f1 | 0.583 | 0.000 | - | 6.50 |" in text
    data = asr_json(result)
    assert data["median_mcd_db"] == {"slt": 4.5, "f1": 6.5} and data["mean_wer"][TEACHER]["slt"] == 0.125
    plain = AsrResult(sentences, "neutral", {MODEL: {"slt": ["", ""]}, TEACHER: {"slt": ["", ""]}}, 1.0)
    assert "MCD" not in "\n".join(asr_markdown(plain)) and "mcd_db" not in asr_json(plain)


def test_emotion_report_checks_the_order_per_source() -> None:
    rising = {e: 100.0 + 20 * k for k, e in enumerate(PITCH_ORDER)}
    check = EmotionCheck(["It is late."], {"model": {"slt": rising}, "teacher": {"slt": {**rising, "sad": 500.0}}},
                         2.0)
    text = "\n".join(emotion_markdown(check))
    assert "| slt | model | " + " | ".join(f"{rising[e]:.0f}" for e in PITCH_ORDER) + " | yes |" in text
    assert "| slt | teacher | 500 |" in text and text.count("| no |") == 1 and "in order: 100 %" in text


def test_evaluate_refuses_an_unknown_voice_and_a_bank_without_it(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown voice.*nope"):
        cli.main(["--asr-only", "--asr-voices", "f1,nope", "--out", str(tmp_path / "asr.md")])
    bank = tmp_path / "bank.json"
    from_styles({("f1", e): np.zeros(4) for e in EMOTIONS}, "f1", "neutral").save(bank)
    with pytest.raises(SystemExit, match="no presets for slt"):
        cli.main(["--asr-only", "--asr-voices", "slt", "--voice-bank", str(bank), "--out", str(tmp_path / "asr.md")])
    with pytest.raises(SystemExit, match="no presets for m1"):  # the full evaluation needs every voice of --voices
        cli.main(["--voices", "f1,m1", "--voice-bank", str(bank), "--out", str(tmp_path / "eval.md")])


def test_mcd_to_a_flite_voice_is_taken_in_its_band() -> None:
    from tts_triton.core import audio
    from tts_triton.evaluate.asr import band_limit, teacher_band

    assert teacher_band("kal16", "happy") == teacher_band("kal16", "neutral") == 16000  # flite renders them
    assert teacher_band("slt", "happy") is None and teacher_band("f1", "happy") is None  # festival, espeak-ng
    t = np.arange(audio.SAMPLE_RATE) / audio.SAMPLE_RATE
    low, high = np.sin(2 * np.pi * 1000 * t), np.sin(2 * np.pi * 10000 * t)
    out = band_limit((low + high).astype(np.float32), teacher_band("kal16", "happy"))
    assert np.abs(out - low).max() < 1e-3  # the 10 kHz tone is gone, the 1 kHz one kept
    assert band_limit(high, None) is high


@needs_teachers
@pytest.mark.slow
def test_round_trip_and_emotion_order_of_slt(tmp_path: Path) -> None:
    """A real run of the evaluate command on slt: one held-out sentence, MCD to flite's rendering, the
    emotion order on one sentence, with a bank of the shipped checkpoint's encoder over f1 and slt clips."""
    pytest.importorskip("pocketsphinx")
    from tts_triton.models.checkpoint import resolve

    bank = tmp_path / "bank.json"
    voice_bank.build_voice_bank(resolve(None), voice_bank.teacher_references([TEXT], ["f1", "slt"])).save(bank)
    out = tmp_path / "asr.md"
    assert cli.main(["--asr-only", "--asr-voices", "slt", "--asr-sentences", "1", "--asr-mcd", "--asr-emotions", "1",
                     "--asr-copy", "--no-flite", "--jobs", "1", "--voice-bank", str(bank), "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert list(data["transcripts"][TEACHER]) == ["slt"] and data["mean_wer"][TEACHER]["slt"] < 0.5
    assert 0 < data["median_mcd_db"]["slt"] < 30
    # the vocoder alone on the teacher's mel is nearer the teacher than the model's own mel
    assert 0 < data["median_copy_mcd_db"]["slt"] < data["median_mcd_db"]["slt"]
    assert data["mean_wer"][COPY]["slt"] <= 0.5 and "vocoder alone: WER" in out.read_text()
    teacher_f0 = data["emotions"]["mean_f0_hz"][TEACHER]["slt"]
    assert data["emotions"]["ordered"][TEACHER]["slt"], teacher_f0  # the HTS engine follows its half-tones
    assert f"| slt | {SLT} |" in out.read_text() and "## Emotion order" in out.read_text()
