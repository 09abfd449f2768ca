"""The in-process façade (tts_triton.serving.voice): it gives what the decode core over the checkpoint's networks
gives when assembled by hand, loads a checkpoint with the bank beside it, and names what is missing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tts_triton.core import audio
from tts_triton.core.layout import VOICE_BANK_FILE
from tts_triton.core.voices import VoiceBank, from_styles
from tts_triton.errors import InvalidInput
from tts_triton.serving.in_process import TorchBackend
from tts_triton.serving.pipeline import Pipeline
from tts_triton.serving.service import SynthesisRequest, TTSService
from tts_triton.serving.voice import Voice
from tts_triton.text import text_to_sequences

TEXT = "Turn left here. Then stop."


@pytest.fixture(scope="module")
def bank(tiny_checkpoint: Any) -> VoiceBank:
    dim = tiny_checkpoint.config.style.dim
    rng = np.random.default_rng(3)
    return from_styles({("f1", "neutral"): rng.normal(size=dim), ("f1", "happy"): rng.normal(size=dim)},
                       "f1", "neutral")


def by_hand(checkpoint: Any, bank: VoiceBank, request: SynthesisRequest) -> list:
    service = TTSService(checkpoint.config, bank)
    backend = TorchBackend(checkpoint.stages(), checkpoint.config)

    async def run() -> list:
        return [c async for c in service.stream(request, backend)]

    return asyncio.run(run())


def test_synthesize_is_the_service_over_the_networks_in_process(tiny_checkpoint: Any, bank: VoiceBank) -> None:
    speech = Voice(tiny_checkpoint, bank).synthesize(TEXT, "f1", "happy", speed=1.5, pitch=2.0, words=True)
    chunks = by_hand(tiny_checkpoint, bank, SynthesisRequest(TEXT, "f1", "happy", speed=1.5, pitch=2.0, words=True))
    expected = np.concatenate([c.audio for c in chunks])
    assert speech.sample_rate == audio.SAMPLE_RATE and speech.audio.dtype == np.float32
    assert speech.audio.shape == expected.shape and len(expected) > 0
    np.testing.assert_allclose(speech.audio, expected, atol=1e-6)
    assert [w.word for w in speech.words] == [w.word for c in chunks for w in c.words] == ["Turn", "left", "here",
                                                                                         "Then", "stop"]
    assert speech.seconds == pytest.approx(len(expected) / audio.SAMPLE_RATE)


def test_pipeline_is_the_decode_core_over_the_same_networks(tiny_checkpoint: Any) -> None:
    style = np.zeros(tiny_checkpoint.config.style.dim, np.float32)
    sequences = text_to_sequences(TEXT)
    got, got_mel = asyncio.run(Voice(tiny_checkpoint).pipeline().synthesize(sequences, style))
    hand = Pipeline(TorchBackend(tiny_checkpoint.stages(), tiny_checkpoint.config), tiny_checkpoint.config)
    want, want_mel = asyncio.run(hand.synthesize(sequences, style))
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got_mel, want_mel, atol=1e-6)


def test_without_a_bank_synthesize_says_so(tiny_checkpoint: Any) -> None:
    with pytest.raises(ValueError, match="no voice bank"):
        Voice(tiny_checkpoint).synthesize(TEXT)


def test_an_unknown_preset_is_invalid_input_naming_it(tiny_checkpoint: Any, bank: VoiceBank) -> None:
    with pytest.raises(InvalidInput) as raised:
        Voice(tiny_checkpoint, bank).synthesize(TEXT, "nobody")
    assert raised.value.input_name == "VOICE"


def test_load_takes_the_bank_beside_the_checkpoint(tiny_checkpoint: Any, bank: VoiceBank, tmp_path: Path) -> None:
    tiny_checkpoint.save(tmp_path / "voice.pt")
    assert Voice.load(tmp_path / "voice.pt").bank is None
    bank.save(tmp_path / VOICE_BANK_FILE)
    voice = Voice.load(str(tmp_path / "voice.pt"))
    assert voice.bank is not None and voice.bank.voices == ["f1"]
    assert voice.config == tiny_checkpoint.config
    assert voice.synthesize("Stop.").seconds > 0


def test_load_of_a_file_that_is_no_checkpoint_names_it(tmp_path: Path) -> None:
    (tmp_path / "notes.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="notes.pt"):
        Voice.load(tmp_path / "notes.pt")
