"""Speech controls and WORDS through a real tritonserver: one streamed test (``tts``), one offline (``tts_offline``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tts_triton.client import HttpTTSClient, TTSClient
from tts_triton.core import audio, contract
from tts_triton.core.voices import VoiceBank
from tts_triton.models.checkpoint import Checkpoint
from tts_triton.processes.triton_server import TritonServer
from tts_triton.serving.voice import Voice

TEXT = '<speak>Turn left here. <break time="300ms"/> Then stop at <say-as interpret-as="cardinal">12</say-as>.</speak>'
OPTIONS = {"speed": 1.5, "pitch": 3.0, "volume": -6.0}


def in_process(checkpoint: Checkpoint, model_repository: Path) -> tuple[np.ndarray, list]:
    bank = VoiceBank.load(model_repository / contract.TTS / "voice_bank.json")
    speech = Voice(checkpoint, bank).synthesize(TEXT, words=True, **OPTIONS)
    return speech.audio, speech.words


def check_words(words: list, seconds: float) -> None:
    assert [w.word for w in words][:3] == ["Turn", "left", "here"] and words[-1].word == "twelve"
    for a, b in zip(words, words[1:], strict=False):
        assert a.start <= a.end <= b.start <= b.end
    assert words[0].start >= 0 and words[-1].end <= seconds + 1e-3
    assert TEXT[words[-1].text_start : words[-1].text_end] == "12"


@pytest.mark.slow
def test_stream_controls_and_words_match_in_process(server: TritonServer, checkpoint: Checkpoint,
                                                    model_repository: Path) -> None:
    with TTSClient(server.grpc_url, timeout=120) as client:
        chunks = list(client.stream(TEXT, return_words=True, **OPTIONS))
    streamed = np.concatenate([c.audio for c in chunks])
    words = [w for c in chunks for w in c.words]
    elapsed = 0.0
    for c in chunks:  # each word comes with a chunk that ends at or after it
        elapsed += len(c.audio) / audio.SAMPLE_RATE
        assert all(w.end <= elapsed + 1e-3 for w in c.words)
    check_words(words, len(streamed) / audio.SAMPLE_RATE)
    reference, reference_words = in_process(checkpoint, model_repository)
    assert streamed.shape == reference.shape
    assert 10 * np.log10(np.sum(reference**2) / np.sum((streamed - reference) ** 2)) >= 30.0
    assert [(w.word, w.text_start) for w in words] == [(w.word, w.text_start) for w in reference_words]


@pytest.mark.slow
def test_offline_returns_every_word(server: TritonServer) -> None:
    with HttpTTSClient(server.http_url, timeout=120) as client:
        result = client.synthesize(TEXT, return_words=True, **OPTIONS)
    assert result.chunks == 1
    check_words(list(result.words), result.duration)


@pytest.mark.parametrize(("name", "value"), [("SPEED", 0.25), ("VOLUME", float("nan"))])
def test_the_server_refuses_a_bad_control_naming_it(server: TritonServer, name: str, value: float) -> None:
    """Sent past the client's own check: the server answers INVALID_ARG (HTTP 400) naming the input."""
    inputs = [httpclient.InferInput("TEXT", [1], "BYTES"), httpclient.InferInput(name, [1], "FP32")]
    inputs[0].set_data_from_numpy(np.array([b"Hi."], dtype=np.object_))
    inputs[1].set_data_from_numpy(np.array([value], np.float32))
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        with pytest.raises(InferenceServerException, match=name) as caught:
            client.infer(contract.TTS_OFFLINE, inputs)
    finally:
        client.close()
    assert str(caught.value.status()) == "400"
