"""The gateway's pure logic: request parsing, voices and emotions, keys and limits, the encoders' byte sink."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tts_triton.client import VoiceCatalog
from tts_triton.gateway.encoders import FORMATS, _Sink, new_encoder
from tts_triton.gateway.errors import ApiError
from tts_triton.gateway.limits import StreamLimiter, auth_problem, check_key, load_api_keys
from tts_triton.gateway.schema import parse_speech_request
from tts_triton.gateway.voices import VoiceMap, load_voice_map

BANK = VoiceCatalog(voices=("f1", "m1"), emotions=("neutral", "happy", "angry"), default_voice="f1",
                    default_emotion="neutral")


def _parse(**body: object) -> object:
    return parse_speech_request(json.dumps({"model": "tts-1", "voice": "alloy", "input": "Hi.", **body}).encode(),
                                max_input_chars=20)


def test_a_request_gets_openai_defaults_and_every_problem_names_its_field() -> None:
    request = _parse()
    assert (request.response_format, request.speed, request.stream_format) == ("mp3", 1.0, "audio")
    assert _parse(voice={"id": "f1"}).voice == "f1"
    for body, param, status in (({"speed": "fast"}, "speed", 400), ({"speed": 0.1}, "speed", 400),
                                ({"input": "x" * 21}, "input", 413), ({"voice": ""}, "voice", 400),
                                ({"model": 3}, "model", 400), ({"stream": True}, "stream", 400)):
        with pytest.raises(ApiError) as caught:
            _parse(**body)
        assert (caught.value.param, caught.value.status) == (param, status) and param in caught.value.message


def test_voices_map_through_the_table_and_instructions_pick_an_emotion() -> None:
    voices = VoiceMap({"alloy": "f1", "echo": "m9"})
    assert voices.voice("m1", BANK) == "m1" and voices.voice("Alloy", BANK) == "f1"
    assert voices.voice("echo", BANK) == "f1"  # a preset the bank lacks: the bank's default voice
    with pytest.raises(ApiError, match="available voices: f1, m1, alloy, echo"):
        voices.voice("nobody", BANK)
    assert voices.emotion("Speak in a cheerful tone, not angry", BANK) == "happy"
    assert voices.emotion("ANGRY!", BANK) == "angry" and voices.emotion("slowly", BANK) is None
    m1_default = VoiceCatalog(voices=("f1", "m1"), emotions=("neutral",), default_voice="m1", default_emotion="neutral")
    assert VoiceMap().voice("alloy", m1_default) == "m1"  # OpenAI's usual name: the server's default voice


def test_a_voice_map_file_adds_to_the_table(tmp_path: Path) -> None:
    (tmp_path / "map.json").write_text('{"Narrator": "m1"}')
    assert load_voice_map(tmp_path / "map.json").voice("narrator", BANK) == "m1"
    (tmp_path / "bad.json").write_text('["m1"]')
    with pytest.raises(ValueError, match="JSON object"):
        load_voice_map(tmp_path / "bad.json")


def test_keys_from_file_and_environment(tmp_path: Path) -> None:
    (tmp_path / "keys").write_text("sk-a  # ops\n\n# old: sk-z\nsk-b\n")
    keys = load_api_keys(tmp_path / "keys", {"TTS_GATEWAY_API_KEYS": "sk-c, ,sk-d"})
    assert keys == {"sk-a", "sk-b", "sk-c", "sk-d"}
    check_key(keys, "Bearer sk-b")
    check_key(frozenset(), None)
    for header in (None, "sk-b", "Bearer sk-x", "Basic sk-b"):
        with pytest.raises(ApiError) as caught:
            check_key(keys, header)
        assert caught.value.status == 401
    assert auth_problem("127.0.0.1", frozenset(), allow_anonymous=False) is None
    assert "--allow-anonymous" in auth_problem("0.0.0.0", frozenset(), allow_anonymous=False)
    assert auth_problem("0.0.0.0", keys, allow_anonymous=False) is None


def test_the_stream_limit_answers_429_with_retry_after() -> None:
    limiter = StreamLimiter(1, retry_after_s=2)
    limiter.acquire()
    with pytest.raises(ApiError) as caught:
        limiter.acquire()
    assert caught.value.status == 429 and caught.value.headers == {"Retry-After": "2"}
    limiter.release()
    limiter.acquire()


def test_the_sink_hands_out_appended_bytes_and_drops_rewrites_of_sent_ones() -> None:
    sink = _Sink()
    sink.write(b"HEAD0000")
    assert sink.take() == b"HEAD0000"
    sink.write(b"data")
    sink.seek(4)
    sink.write(b"1234")  # a length filled in at close: already sent
    sink.seek(0, io.SEEK_END)
    sink.write(b"!")
    assert sink.take() == b"data!" and sink.tell() == 13


@pytest.mark.parametrize("name", [n for n in FORMATS if FORMATS[n].streams])
def test_streaming_formats_emit_bytes_before_the_end(name: str) -> None:
    encoder = new_encoder(name, 22050)
    tone = (0.3 * np.sin(np.arange(22050) * 2 * np.pi * 220 / 22050)).astype(np.float32)
    parts = [encoder.encode(tone[i:i + 2205]) for i in range(0, tone.size, 2205)]
    assert sum(1 for p in parts if p) >= len(parts) // 2  # most chunks leave at once
    data = b"".join(parts) + encoder.finish()
    if name in ("wav", "mp3", "opus"):
        samples, rate = sf.read(io.BytesIO(data))
        assert abs(samples.shape[0] / rate - 1.0) < 0.1


def test_aac_is_refused_up_front_naming_the_field_where_pyav_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from tts_triton.gateway.encoders import available_formats

    assert "aac" in available_formats()  # PyAV is in the gateway extra
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "av" else real(name, *a))
    assert available_formats() == ("mp3", "opus", "flac", "wav", "pcm")
    with pytest.raises(ApiError) as refused:
        _parse(response_format="aac")
    assert refused.value.status == 400 and refused.value.param == "response_format"
    assert "PyAV" in str(refused.value.body()) and _parse(response_format="wav").response_format == "wav"
