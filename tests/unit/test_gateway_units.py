"""The gateway's pure logic: request parsing, voices, instructions, keys and limits, the encoders' byte sink and
wav header, the time-stretch."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tts_triton.client import VoiceCatalog
from tts_triton.gateway.encoders import FORMATS, OUTPUT_RATE, _Sink, new_encoder
from tts_triton.gateway.errors import ApiError
from tts_triton.gateway.instructions import read_instructions
from tts_triton.gateway.limits import StreamLimiter, auth_problem, check_key, load_api_keys
from tts_triton.gateway.schema import parse_speech_request
from tts_triton.gateway.stretch import TimeStretch, split_speed
from tts_triton.gateway.voice_map import VoiceMap, load_voice_map

BANK = VoiceCatalog(voices=("f1", "m1"), emotions=("neutral", "happy", "angry"), default_voice="f1",
                    default_emotion="neutral")


def _parse(**body: object) -> object:
    return parse_speech_request(json.dumps({"model": "tts-1", "voice": "alloy", "input": "Hi.", **body}).encode(),
                                max_input_chars=20)


def test_a_request_gets_openai_defaults_and_every_problem_names_its_field() -> None:
    request = _parse()
    assert (request.response_format, request.speed, request.stream_format) == ("mp3", 1.0, "audio")
    assert _parse(voice={"id": "f1"}).voice == "f1"
    nulls = _parse(speed=None, response_format=None, instructions=None, stream_format=None)
    assert (nulls.response_format, nulls.speed, nulls.instructions, nulls.stream_format) == ("mp3", 1.0, None, "audio")
    assert _parse(speed=0.25).speed == 0.25 and _parse(speed=4).speed == 4.0
    assert _parse(stream=True, language="en").ignored == ("language", "stream")  # unknown fields: ignored, named
    for body, param, status in (({"speed": "fast"}, "speed", 400), ({"speed": 0.2}, "speed", 400),
                                ({"speed": 4.5}, "speed", 400), ({"speed": True}, "speed", 400),
                                ({"input": "x" * 21}, "input", 413), ({"voice": ""}, "voice", 400),
                                ({"model": 3}, "model", 400), ({"model": None}, "model", 400),
                                ({"response_format": "ogg"}, "response_format", 400)):
        with pytest.raises(ApiError) as caught:
            _parse(**body)
        assert (caught.value.param, caught.value.status) == (param, status) and param in caught.value.message


def test_voices_map_through_the_table() -> None:
    voices = VoiceMap({"alloy": "f1", "echo": "m9"})
    assert voices.voice("m1", BANK) == "m1" and voices.voice("Alloy", BANK) == "f1"
    assert voices.voice("echo", BANK) == "f1"  # a preset the bank lacks: the bank's default voice
    with pytest.raises(ApiError, match="available voices: f1, m1, alloy, echo"):
        voices.voice("nobody", BANK)
    m1_default = VoiceCatalog(voices=("f1", "m1"), emotions=("neutral",), default_voice="m1", default_emotion="neutral")
    assert VoiceMap().voice("alloy", m1_default) == "m1"  # OpenAI's usual name: the server's default voice


def test_openais_voices_reach_the_natural_female_and_male() -> None:
    from tts_triton.core.voices import VoiceBank
    from tts_triton.models.checkpoint import DEFAULT_VOICE_BANK

    shipped = VoiceBank.load(DEFAULT_VOICE_BANK)
    catalog = VoiceCatalog(voices=tuple(shipped.voices), emotions=("neutral",), default_voice=shipped.default_voice,
                           default_emotion="neutral")
    table = VoiceMap().table(catalog)
    assert {table[name] for name in ("alloy", "coral", "nova", "sage", "shimmer", "marin")} == {"slt"}
    assert {table[name] for name in ("ash", "ballad", "cedar", "echo", "fable", "onyx", "verse")} == {"m8"}
    assert VoiceMap().voice("m1", catalog) == "m1"  # the other males by their own names
    assert "kal16" in shipped.voices and VoiceMap().voice("kal16", catalog) == "kal16"  # by its own name


def test_a_voice_map_file_adds_to_the_table(tmp_path: Path) -> None:
    (tmp_path / "map.json").write_text('{"Narrator": "m1", "onyx": ["m9", "f1"]}')
    assert load_voice_map(tmp_path / "map.json").voice("narrator", BANK) == "m1"
    assert load_voice_map(tmp_path / "map.json").voice("onyx", BANK) == "f1"  # the first preset the bank has
    for bad in ('["m1"]', '{"onyx": []}', '{"onyx": [3]}'):
        (tmp_path / "bad.json").write_text(bad)
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


@pytest.mark.parametrize(("text", "expected"), [
    ("Speak in a cheerful tone, not angry", {"emotion": "happy"}),
    ("ANGRY!", {"emotion": "angry"}),
    ("Sound surprised", {}),  # an emotion BANK lacks
    ("whisper", {"volume": -15.0}),
    ("Speak softly and slowly", {"volume": -6.0, "speed": 0.85}),
    ("Very slowly, in a deep voice, sadly", {"speed": 0.7, "pitch": -3.0}),  # sad: not in BANK
    ("a high-pitched, excited voice, very fast", {"pitch": 3.0, "emotion": "happy", "speed": 1.4}),
    ("LOUD and quick", {"volume": 4.0, "speed": 1.2}),
    ("Shouting!", {"volume": 8.0}),
    ("Not too fast, don't shout, never sad", {}),  # negated
    ("slowly at first, then quickly", {"speed": 0.85}),  # the first phrase of a control wins
    ("talk like a pirate", {}),  # beyond the controls: nothing changes
    (None, {}),
])
def test_instructions_map_phrases_to_the_controls(text: str | None, expected: dict) -> None:
    found = read_instructions(text, BANK.emotions)
    defaults = {"emotion": None, "speed": 1.0, "pitch": 0.0, "volume": 0.0}
    assert {k: getattr(found, k) for k in defaults} == {**defaults, **expected}
    assert len(found.phrases) == len(expected)


def test_wav_streams_with_the_streaming_sizes_and_python_wave_reads_it_all() -> None:
    encoder = new_encoder("wav", 22050)
    tone = (0.3 * np.sin(np.arange(22050) * 2 * np.pi * 220 / 22050)).astype(np.float32)
    data = b"".join(encoder.encode(tone[i:i + 2205]) for i in range(0, tone.size, 2205)) + encoder.finish()
    assert data[4:8] == data[40:44] == b"\xff\xff\xff\xff"  # OpenAI's streamed wav has the same header
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (OUTPUT_RATE, 1, 2)
        frames = w.readframes(w.getnframes())
    assert len(frames) == len(data) - 44 and abs(len(frames) / 2 / OUTPUT_RATE - 1.0) < 0.01


def _f0(samples: np.ndarray, rate: int) -> float:
    """The F0 of a steady harmonic signal: the autocorrelation's peak between 60 and 400 Hz."""
    ac = np.correlate(samples, samples, "full")[len(samples) - 1:]
    low, high = rate // 400, rate // 60
    return rate / (low + int(np.argmax(ac[low:high])))


@pytest.mark.parametrize("speed", [0.5, 0.8, 1.5, 2.0])
def test_the_time_stretch_keeps_pitch_and_level_and_is_chunk_safe(speed: float) -> None:
    rate = 22050
    phase = 2 * np.pi * 150 * np.arange(rate) / rate  # 1 s of a 150 Hz voice-like harmonic tone
    tone = (0.2 * sum(np.sin(k * phase) / k for k in range(1, 8))).astype(np.float32)
    whole = TimeStretch(speed, rate)
    once = np.concatenate([whole.process(tone), whole.finish()])
    pieces = TimeStretch(speed, rate)
    chunked = np.concatenate([*(pieces.process(tone[i:i + 1234]) for i in range(0, rate, 1234)), pieces.finish()])
    assert len(once) == round(rate / speed) and np.array_equal(once, chunked)
    middle = once[len(once) // 4: 3 * len(once) // 4]
    assert abs(_f0(middle, rate) / 150 - 1) < 0.02
    assert abs(np.sqrt(np.mean(middle ** 2)) / np.sqrt(np.mean(tone ** 2)) - 1) < 0.05  # no cancellation dips


def test_speeds_beyond_the_model_go_to_the_time_stretch() -> None:
    assert split_speed(1.5) == (1.5, 1.0) and split_speed(4.0) == (2.0, 2.0) and split_speed(0.25) == (0.5, 0.5)
    assert split_speed(3.0) == (2.0, 1.5)


@pytest.mark.parametrize(("body", "param", "phrase"), [
    (b"[" * 100_000 + b"]" * 100_000, None, "nested too deeply"),
    (b'{"model": "tts-1", "voice": "alloy", "input": "Hi \\ud800."}', "input", "lone surrogate"),
    (b'{"model": "tts-1", "voice": "\\udfff", "input": "Hi."}', "voice", "lone surrogate"),
    (b'{"model": "tts-1", "voice": "alloy", "input": "Hi.", "x\\ud800": 1}', None, "lone surrogate"),
    (b'{"model": "tts-1", "voice": "alloy", "input": ""}', "input", "must contain text to speak"),
])
def test_malformed_bodies_are_400s_naming_the_problem(body: bytes, param: str | None, phrase: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_speech_request(body, max_input_chars=20)
    assert (caught.value.status, caught.value.param) == (400, param) and phrase in caught.value.message
    json.dumps(caught.value.body(), ensure_ascii=False).encode()  # the answer itself can be sent


@pytest.mark.parametrize(("raw", "phrase"), [
    ("[" * 100_000, "nested too deeply"),
    ('{"text": "Hi \\ud800. "}', "text: not valid Unicode"),
    ('{"text": " ", "voice_settings": {"\\udc00": 1}}', "voice_settings.\\udc00: not valid Unicode"),
])
def test_malformed_socket_messages_are_session_errors(raw: str, phrase: str) -> None:
    from tts_triton.gateway.stream_messages import SessionError, parse_message

    with pytest.raises(SessionError) as caught:
        parse_message(raw)
    assert caught.value.code == 1008 and phrase in caught.value.message
    caught.value.message.encode()


def test_key_quotas_bound_streams_and_requests_per_minute() -> None:
    from tts_triton.gateway.limits import KeyQuotas

    now = [0.0]
    quotas = KeyQuotas(max_streams=2, per_minute=3, clock=lambda: now[0])
    releases = [quotas.acquire("a"), quotas.acquire("a")]
    with pytest.raises(ApiError) as caught:
        quotas.acquire("a")
    assert caught.value.status == 429 and caught.value.code == "key_too_many_streams"
    quotas.acquire("b")  # another key is not held back
    releases[0]()
    quotas.acquire("a")
    for _ in range(3):
        quotas.start("a")
    with pytest.raises(ApiError) as caught:
        quotas.start("a")
    assert caught.value.code == "key_rate_limited" and caught.value.headers == {"Retry-After": "20"}
    quotas.start("b")
    now[0] = 20.0  # a third of a minute: one more
    quotas.start("a")
    with pytest.raises(ApiError):
        quotas.start("a")


@pytest.mark.parametrize(("text", "speed", "low", "high"), [
    ("The quick brown fox jumps over the lazy dog. " * 90, 1.0, 150, 250),  # ~4,000 characters: ~3-4 minutes
    ("The quick brown fox jumps over the lazy dog. " * 90, 0.25, 600, 1000),
    ("9" * 4096, 1.0, 1000, 1100),  # digit by digit: ~20,000 characters read
    ("<speak>" + '<break time="10s"/>' * 180 + "</speak>", 0.25, 7000, 7300),
    ('<speak>Hi <prosody rate="50%">there</prosody>.</speak>', 1.0, 0.4, 1.0),
    ("<speak>Hello <s>world</speak>", 1.0, 0.0, 0.0),  # malformed: Triton says why
])
def test_audio_seconds_are_estimated_from_the_text_as_read(text: str, speed: float, low: float, high: float) -> None:
    from tts_triton.gateway.estimate import audio_seconds

    assert low <= audio_seconds(text, speed) <= high


def test_bench_gateway_takes_url_as_bench_does() -> None:
    """``--url HOST:PORT`` was a string where the bench's server helper wants a list: ``'l': expected host:port``."""
    from tts_triton.bench.gateway import _triton, parser

    with _triton(parser().parse_args(["--url", "localhost:8001", "--out", "unused"])) as url:
        assert url == "localhost:8001"
    with _triton(parser().parse_args(["--url", "a:1", "--url", "b:2", "--out", "unused"])) as url:
        assert url == "a:1,b:2"
