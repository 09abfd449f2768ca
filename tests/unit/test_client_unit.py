"""Client library logic without a server: request tensors, error classification, audio I/O, and turning Triton's
responses into chunks and a synthesis (the streams themselves: test_client_stream.py)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import soundfile as sf
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcclient_aio
import tritonclient.http as httpclient
from client_data import SR, UNKNOWN_MODEL, FakeRpcError, infer_response
from tritonclient.utils import InferenceServerException

from tts_triton.client import (
    AsyncTTSClient,
    AudioChunk,
    HttpTTSClient,
    InvalidInputError,
    ServerUnavailableError,
    Synthesis,
    TTSClient,
    TTSError,
    TTSTimeoutError,
    VoiceCatalog,
    build_request,
    load_reference_audio,
    save_wav,
)
from tts_triton.client.balancer import parse_targets
from tts_triton.client.errors import (
    ServerBusyError,
    classify_error,
    refusal_error,
    refused,
    translate_error,
    translated_errors,
)
from tts_triton.client.request import INPUTS, chunk_from_result, is_final_response
from tts_triton.core.contract import TEXT, VOICE
from tts_triton.errors import BUSY, FAILED, INVALID_INPUT, TIMED_OUT, mark

NUMPY_DTYPES = {"bytes": np.object_, "float32": np.float32, "int32": np.int32}


# --- request tensors --------------------------------------------------------------------------------


def assert_matches_contract(tensors: dict[str, np.ndarray]) -> None:
    for name, array in tensors.items():
        spec = INPUTS[name]
        assert array.dtype == NUMPY_DTYPES[spec.dtype], name
        assert array.ndim == len(spec.dims), name
        assert all(d == -1 or d == n for d, n in zip(spec.triton_dims, array.shape, strict=True)), name


def test_text_only_request_sends_text_alone_as_utf8() -> None:
    request = build_request("Grüße, 世界")
    assert list(request.tensors) == ["TEXT"]
    assert request.tensors["TEXT"][0].decode("utf-8") == "Grüße, 世界"
    assert request.outputs == ("AUDIO", "SAMPLE_RATE")
    assert not request.return_mel
    assert_matches_contract(request.tensors)


def test_full_request_matches_contract() -> None:
    stereo = np.random.default_rng(0).uniform(-1, 1, (4000, 2))  # float64
    request = build_request("hi", voice="alice", emotion="happy", reference_audio=stereo,
                            reference_sample_rate=16000, return_mel=True, speed=1.25, pitch=-2, volume=3.0,
                            return_words=True, sample_rate=24000)
    assert set(request.tensors) == set(INPUTS)
    assert_matches_contract(request.tensors)
    np.testing.assert_allclose(request.tensors["REFERENCE_AUDIO"], stereo.mean(axis=1), rtol=1e-6)
    assert request.tensors["REFERENCE_SAMPLE_RATE"].tolist() == [16000]
    assert request.outputs == ("AUDIO", "SAMPLE_RATE", "MEL", "WORDS") and request.return_mel


@pytest.mark.parametrize("module", [grpcclient, grpcclient_aio, httpclient])
def test_infer_inputs_carry_contract_wire_types(module: Any) -> None:
    request = build_request("hi", voice="bob", reference_audio=np.zeros(10, np.float32), reference_sample_rate=8000,
                            return_mel=True)
    inputs = {i.name(): i for i in request.infer_inputs(module)}
    assert set(inputs) == set(request.tensors)
    for name, infer_input in inputs.items():
        assert infer_input.datatype() == INPUTS[name].wire_dtype
        assert infer_input.shape() == list(request.tensors[name].shape)
    assert [o.name() for o in request.requested_outputs(module)] == ["AUDIO", "SAMPLE_RATE", "MEL"]


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        (dict(text=b"bytes"), "TEXT"),
        (dict(text="hi", voice=3), "VOICE"),
        (dict(text="hi", emotion=["happy"]), "EMOTION"),
        (dict(text="hi", reference_audio=np.zeros(10)), "REFERENCE_SAMPLE_RATE"),
        (dict(text="hi", reference_sample_rate=16000), "REFERENCE_SAMPLE_RATE"),
        (dict(text="hi", reference_audio=np.zeros(10), reference_sample_rate=0), "REFERENCE_SAMPLE_RATE"),
        (dict(text="hi", reference_audio=np.zeros(10), reference_sample_rate=16000.0), "REFERENCE_SAMPLE_RATE"),
        (dict(text="hi", reference_audio=np.zeros((2, 2, 2)), reference_sample_rate=16000), "REFERENCE_AUDIO"),
        (dict(text="hi", reference_audio=np.zeros(0), reference_sample_rate=16000), "REFERENCE_AUDIO"),
        (dict(text="hi", reference_audio=np.array(["a"]), reference_sample_rate=16000), "REFERENCE_AUDIO"),
    ],
)
def test_unencodable_arguments_raise_invalid_input_naming_it(kwargs: dict[str, Any], names: str) -> None:
    with pytest.raises(InvalidInputError, match=names) as info:
        build_request(**kwargs)
    assert isinstance(info.value, ValueError)


def test_request_options_are_one_set_for_every_method() -> None:
    request = build_request("hi", voice="f1", timeout=2.5)
    assert request.timeout == 2.5 and list(request.tensors) == ["TEXT", "VOICE"]
    assert build_request("hi").timeout is None
    with pytest.raises(TypeError, match="unknown request option"):
        build_request("hi", tempo=2.0)  # type: ignore[call-arg]
    methods = (TTSClient.stream, TTSClient.synthesize, AsyncTTSClient.stream, AsyncTTSClient.synthesize,
               HttpTTSClient.synthesize)
    assert all(list(inspect.signature(m).parameters) == ["self", "text", "options"] for m in methods)


def test_clients_validate_eagerly_without_connecting() -> None:
    client = TTSClient("grpc://127.0.0.1:1")  # nothing listens there; construction does not connect
    with pytest.raises(InvalidInputError, match="TEXT"):
        client.stream(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="REFERENCE_SAMPLE_RATE"):
        AsyncTTSClient("127.0.0.1:1").stream("hi", reference_audio=np.zeros(5))
    client.close()


def test_parse_targets() -> None:
    assert parse_targets("localhost:8001") == ("localhost:8001",)
    assert parse_targets("grpc://tts.example:9001/") == ("tts.example:9001",)
    assert parse_targets("http://h:8000", "http") == ("h:8000",)
    assert parse_targets(["a:1,grpc://b:2", " dns:///tts-grpc.ns.svc:8001 ", "a:1"]) == (
        "a:1", "b:2", "dns:///tts-grpc.ns.svc:8001")
    for bad in ("localhost", "a:1,http://b:2", "dns:///name", ","):
        with pytest.raises(ValueError):
            parse_targets(bad)
    with pytest.raises(ValueError, match="http://"):
        HttpTTSClient("grpc://h:8001")


# --- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "status", "kind"),
    [
        # statuses decide when known
        ("anything", "StatusCode.INVALID_ARGUMENT", InvalidInputError),
        ("anything", "400", InvalidInputError),
        ("Request for unknown model: 'tts' is not found", "StatusCode.NOT_FOUND", ServerUnavailableError),
        ("failed to connect to all addresses", "StatusCode.UNAVAILABLE", ServerUnavailableError),
        ("anything", "503", ServerUnavailableError),
        ("Deadline Exceeded", "StatusCode.DEADLINE_EXCEEDED", TTSTimeoutError),
        ("anything", "504", TTSTimeoutError),
        ("decoder failed", "StatusCode.INTERNAL", TTSError),
        ("VOICE: 'x' is unknown", "StatusCode.INTERNAL", TTSError),  # a status is not second-guessed by text
        ("Deadline Exceeded", "500", TTSError),
        # the server's mark decides, with a status or without (a stream error)
        (mark(INVALID_INPUT, "VOICE: unknown voice 'zed'", VOICE), None, InvalidInputError),
        (mark(INVALID_INPUT, "VOICE: unknown voice 'zed'", VOICE), "StatusCode.INVALID_ARGUMENT", InvalidInputError),
        (mark(BUSY, "server busy: limit of 2"), None, ServerBusyError),
        (mark(BUSY, "server busy: limit of 2"), "StatusCode.UNAVAILABLE", ServerBusyError),
        (mark(TIMED_OUT, "synthesis stopped at its time limit of 1 s"), "StatusCode.UNAVAILABLE", TTSTimeoutError),
        (mark(FAILED, "synthesis failed: RuntimeError: x"), None, TTSError),
        ("server busy: limit of 2", None, TTSError),  # unmarked prose decides nothing
        ("invalid input VOICE: unknown voice 'zed'", None, TTSError),
        ("Stream removed (Deadline Exceeded)", None, TTSError),  # a deadline comes with its status, never bare
        # Triton's own stream errors: no mark, no status (real Triton 2.51 texts); their words decide nothing
        ("[request id: <id_unknown>] inference input 'TEXT' data-type is 'INT32', but model 'tts' expects 'BYTES'",
         None, TTSError),
        ("Request for unknown model: 'tts' is not found", None, TTSError),
        ("Request for unknown model: 'tts' has no available versions", None, TTSError),
        ("CUDA out of memory", None, TTSError),
    ],
)
def test_classify_error(message: str, status: str | None, kind: type[TTSError]) -> None:
    assert classify_error(message, status) is kind


#: Triton's refusal of a request for a model it does not have, as a stream error (no status, no mark).
def test_a_refusal_is_unavailable_only_while_the_model_is_not_ready() -> None:
    unknown = InferenceServerException(UNKNOWN_MODEL)
    assert refused(unknown)
    assert not refused(InferenceServerException(mark(INVALID_INPUT, "TEXT: empty text", TEXT)))  # the model's own
    assert not refused(InferenceServerException(UNKNOWN_MODEL, status="StatusCode.NOT_FOUND"))  # off a stream
    unavailable = refusal_error(unknown, model_ready=False)
    assert type(unavailable) is ServerUnavailableError and (unavailable.message, unavailable.status) == (
        UNKNOWN_MODEL, None)
    assert type(refusal_error(unknown, model_ready=True)) is TTSError


def test_translate_error_keeps_server_message_and_status() -> None:
    message = "invalid input VOICE: unknown voice 'x'"
    error = translate_error(InferenceServerException(message, "StatusCode.INVALID_ARGUMENT"))
    assert type(error) is InvalidInputError
    assert (error.message, error.status) == (message, "INVALID_ARGUMENT")
    assert str(error) == f"[INVALID_ARGUMENT] {message}"

    stream_error = translate_error(InferenceServerException(mark(INVALID_INPUT, "TEXT: empty text", TEXT)))
    assert type(stream_error) is InvalidInputError and stream_error.status is None
    assert str(stream_error) == "TEXT: empty text", "the mark is not part of the message"
    assert (stream_error.kind, stream_error.input_name) == (INVALID_INPUT.name, TEXT)

    timeout = translate_error(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"))
    assert type(timeout) is TTSTimeoutError and isinstance(timeout, TimeoutError)
    assert timeout.status == "DEADLINE_EXCEEDED"

    assert type(translate_error(TimeoutError("timed out"))) is TTSTimeoutError
    refused = translate_error(ConnectionRefusedError(111, "Connection refused"))
    assert type(refused) is ServerUnavailableError and isinstance(refused, ConnectionError)


def test_translated_errors_passes_typed_errors_through() -> None:
    original = TTSTimeoutError("Deadline Exceeded", "DEADLINE_EXCEEDED")
    with pytest.raises(TTSTimeoutError) as info, translated_errors():
        raise original
    assert info.value is original
    with pytest.raises(ServerUnavailableError, match="Connection refused"), translated_errors():
        raise ConnectionRefusedError("Connection refused")
    with pytest.raises(KeyError), translated_errors():  # not a transport error: untouched
        raise KeyError("x")


# --- audio I/O --------------------------------------------------------------------------------------


def test_save_wav_round_trip_pcm16(tmp_path: Path) -> None:
    audio = (0.5 * np.sin(np.linspace(0, 40 * np.pi, SR))).astype(np.float32)
    audio[:2] = [1.7, -3.0]  # out of range: clipped, not wrapped
    path = save_wav(tmp_path / "a.wav", audio, SR)
    info = sf.info(path)
    assert (info.samplerate, info.channels, info.subtype, info.format) == (SR, 1, "PCM_16", "WAV")
    back, rate = sf.read(path, dtype="float32")
    assert rate == SR and back.shape == audio.shape
    np.testing.assert_allclose(back, np.clip(audio, -1, 1), atol=1.5 / 32768)
    with pytest.raises(ValueError, match="mono"):
        save_wav(tmp_path / "b.wav", np.zeros((10, 2)), SR)


def test_load_reference_audio_file_mixes_to_mono(tmp_path: Path) -> None:
    left, right = np.full(1600, 0.5), np.full(1600, -0.25)
    sf.write(tmp_path / "ref.flac", np.stack([left, right], axis=1), 16000)
    samples, rate = load_reference_audio(tmp_path / "ref.flac")
    assert rate == 16000 and samples.dtype == np.float32 and samples.shape == (1600,)
    np.testing.assert_allclose(samples, 0.125, atol=1e-4)
    assert load_reference_audio(str(tmp_path / "ref.flac"))[1] == 16000
    with pytest.raises(InvalidInputError, match="REFERENCE_SAMPLE_RATE"):
        load_reference_audio(tmp_path / "ref.flac", 22050)
    with pytest.raises(InvalidInputError, match="REFERENCE_AUDIO"):
        load_reference_audio(tmp_path / "missing.wav")


def test_load_reference_audio_arrays() -> None:
    stereo = np.stack([np.full(500, 0.5), np.zeros(500)])  # [channels, samples]: channels on the shorter axis
    for array in (stereo, stereo.T):
        samples, rate = load_reference_audio(array, 8000)
        assert samples.shape == (500,) and samples.dtype == np.float32 and rate == 8000
        np.testing.assert_allclose(samples, 0.25)
    pcm, _ = load_reference_audio(np.array([-32768, 0, 16384], np.int16), 8000)
    np.testing.assert_allclose(pcm, [-1.0, 0.0, 0.5])
    unsigned, _ = load_reference_audio(np.array([0, 128, 192], np.uint8), 8000)
    np.testing.assert_allclose(unsigned, [-1.0, 0.0, 0.5])
    assert load_reference_audio(np.zeros(10), np.int64(8000))[1] == 8000


# --- responses --------------------------------------------------------------------------------------


def test_chunk_from_result() -> None:
    audio, mel = np.linspace(-1, 1, 256, dtype=np.float32), np.ones((1, 80), np.float32)
    chunk = chunk_from_result(infer_response(audio=audio, mel=mel), index=3, elapsed=0.25, return_mel=True)
    assert chunk is not None
    np.testing.assert_array_equal(chunk.audio, audio)
    assert chunk.audio.flags.writeable and chunk.mel.flags.writeable  # copied out of the response buffer
    assert (chunk.sample_rate, chunk.index, chunk.elapsed, chunk.mel.shape) == (SR, 3, 0.25, (1, 80))
    assert chunk_from_result(infer_response(audio=audio, mel=mel), index=0, elapsed=0, return_mel=False).mel is None
    assert chunk_from_result(infer_response(final=True), index=0, elapsed=0, return_mel=True) is None
    with pytest.raises(TTSError, match="SAMPLE_RATE"):
        chunk_from_result(infer_response(audio=audio, rate=None), index=0, elapsed=0, return_mel=False)


def test_is_final_response() -> None:
    assert is_final_response(infer_response(final=True))
    assert not is_final_response(infer_response(audio=np.zeros(4, np.float32), final=False))
    assert not is_final_response(infer_response(audio=np.zeros(4, np.float32)))


def test_synthesis_from_chunks(tmp_path: Path) -> None:
    chunks = [AudioChunk(np.full(SR // 2, 0.1, np.float32), SR, 0, 0.2, np.zeros((3, 80), np.float32)),
              AudioChunk(np.full(SR // 2, 0.2, np.float32), SR, 1, 0.3, np.zeros((4, 80), np.float32))]
    synthesis = Synthesis.from_chunks(chunks, total_time=0.5)
    assert synthesis.audio.shape == (SR,) and synthesis.chunks == 2 and synthesis.mel.shape == (7, 80)
    assert (synthesis.first_chunk_latency, synthesis.total_time, synthesis.duration) == (0.2, 0.5, 1.0)
    assert synthesis.real_time_factor == pytest.approx(0.5)
    back, rate = sf.read(synthesis.save(tmp_path / "s.wav"), dtype="float32")
    assert rate == SR and back.shape == (SR,)
    with pytest.raises(TTSError, match="without any audio"):
        Synthesis.from_chunks([], 0.1)
    with pytest.raises(TTSError, match="SAMPLE_RATE"):
        Synthesis.from_chunks([chunks[0], AudioChunk(np.zeros(4, np.float32), 16000, 1, 0.3)], 0.5)


def test_voice_bank_from_model_config() -> None:
    bank = ('{"voices": ["a", "b"], "emotions": ["neutral"], "default_voice": "a", "default_emotion": "neutral", '
            '"presets": {"a": {"neutral": [0.5]}, "b": {"neutral": [0.25]}}}')
    config = {"name": "tts", "parameters": {"voice_bank": {"string_value": bank}}}
    expected = VoiceCatalog(("a", "b"), ("neutral",), "a", "neutral")
    assert VoiceCatalog.from_model_config(config) == expected  # tritonclient.http shape
    assert VoiceCatalog.from_model_config({"config": config}) == expected  # tritonclient.grpc as_json shape
    with pytest.raises(TTSError, match="voice_bank"):
        VoiceCatalog.from_model_config({"config": {"name": "tts", "parameters": {}}})
    lacking = {"name": "tts", "parameters": {"voice_bank": {"string_value": bank.replace('"b": ', '"c": ')}}}
    with pytest.raises(TTSError, match=r"of model 'tts' is not a valid voice bank.*lacks presets"):
        VoiceCatalog.from_model_config(lacking)


# --- stream bookkeeping against a scripted tritonclient ------------------------------------------------
