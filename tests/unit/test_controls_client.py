"""Client side of the speech controls: request options, WORDS parsing, subtitles, `say` flags."""

from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest

from tts_triton.cli import main
from tts_triton.client import InvalidInputError, TTSError, Word, build_request
from tts_triton.client.request import chunk_from_result
from tts_triton.client.subtitles import cues, to_srt, to_vtt, words_to_json


class Result:
    def __init__(self, **outputs: np.ndarray) -> None:
        self.outputs = outputs

    def as_numpy(self, name: str) -> np.ndarray | None:
        return self.outputs.get(name)


def test_controls_are_sent_as_fp32_and_none_is_left_out() -> None:
    request = build_request("Hi.", speed=1.5, pitch=None, volume=-6)
    assert request.tensors["SPEED"].dtype == np.float32 and request.tensors["SPEED"].tolist() == [1.5]
    assert "PITCH" not in request.tensors and request.tensors["VOLUME"].tolist() == [-6.0]
    assert "WORDS" not in request.outputs and build_request("Hi.", return_words=True).return_words


@pytest.mark.parametrize(("option", "value", "name"), [("speed", 3.0, "SPEED"), ("pitch", -13, "PITCH"),
                                                       ("volume", "loud", "VOLUME"), ("speed", True, "SPEED")])
def test_bad_controls_name_the_input(option: str, value: object, name: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^{name}:"):
        build_request("Hi.", **{option: value})


def test_ssml_option() -> None:
    assert build_request("Hi <break/> there.", ssml=True).tensors["TEXT"][0] == b"<speak>Hi <break/> there.</speak>"
    assert build_request("<speak>Hi.</speak>", ssml=True).tensors["TEXT"][0] == b"<speak>Hi.</speak>"
    assert build_request("", ssml="<speak>Yo.</speak>").tensors["TEXT"][0] == b"<speak>Yo.</speak>"
    with pytest.raises(InvalidInputError, match="^TEXT:"):
        build_request("Hi.", ssml="<speak>Yo.</speak>")


WORDS = [{"word": "Hello", "start": 0.1, "end": 0.4, "text_start": 0, "text_end": 5},
         {"word": "there", "start": 0.45, "end": 0.8, "text_start": 6, "text_end": 11}]


def test_a_chunk_carries_its_words_and_a_words_only_response_is_kept() -> None:
    raw = np.array([json.dumps(WORDS).encode()], dtype=np.object_)
    rate = np.array([22050], np.int32)
    chunk = chunk_from_result(Result(AUDIO=np.zeros(0, np.float32), SAMPLE_RATE=rate, WORDS=raw), index=0, elapsed=0.0,
                              return_mel=False, return_words=True)
    assert chunk is not None and [w.word for w in chunk.words] == ["Hello", "there"]
    assert chunk.words[1] == Word("there", 0.45, 0.8, 6, 11)
    empty = chunk_from_result(Result(AUDIO=np.zeros(0, np.float32)), index=0, elapsed=0.0, return_mel=False,
                              return_words=True)
    assert empty is None
    with pytest.raises(TTSError, match="WORDS"):
        Word.parse(b'[{"word": "x"}]')


def test_subtitles() -> None:
    words = [Word(**w) for w in WORDS] + [Word("Later", 2.0, 2.5, 12, 17)]
    assert cues(words) == [(0.1, 0.8, "Hello there"), (2.0, 2.5, "Later")]  # a 1.2 s silence starts a new cue
    assert to_srt(words).startswith("1\n00:00:00,100 --> 00:00:00,800\nHello there\n\n2\n00:00:02,000 --> ")
    assert to_vtt(words).startswith("WEBVTT\n\n00:00:00.100 --> 00:00:00.800\nHello there\n\n")
    assert json.loads(words_to_json(words))[0] == WORDS[0]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_say_needs_text_or_ssml(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", _Terminal())  # nothing piped in: a person at a terminal
    assert main(["say", "-o", str(tmp_path / "a.wav")]) != 0
    assert "give the text to speak" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"  \n")))  # a pipe with nothing to speak
    assert main(["say", "-o", str(tmp_path / "a.wav")]) != 0
    assert "standard input is empty" in capsys.readouterr().err
    assert main(["say", "Hi.", "--ssml", str(tmp_path / "missing.xml"), "-o", str(tmp_path / "a.wav")]) != 0
    assert main(["say", "--ssml", str(tmp_path / "missing.xml"), "-o", str(tmp_path / "a.wav")]) != 0
    assert "no such file" in capsys.readouterr().err
