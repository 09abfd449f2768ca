"""The rough edges of issue 36 against the session's real tritonserver and the ``tts-triton say`` command: the output
sample rate, text that is not English, the pronunciation lexicon read again when it changes, hostile text of the
new readings, and ``say`` reading standard input and streaming into a pipe that closes."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
import wave
from pathlib import Path

import numpy as np
import pytest
import soxr
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tts_triton.client import HttpTTSClient, InvalidInputError, TTSClient
from tts_triton.core.contract import OUTPUT_SAMPLE_RATE, TEXT, TTS_OFFLINE
from tts_triton.processes.triton_server import TritonServer

TTS_TRITON = str(Path(sys.executable).with_name("tts-triton"))
TEXT_OF_THREE = "Turn left at the corner. Then walk two blocks. The shop is on your right."


def test_output_sample_rate_is_streamed_gaplessly(server: TritonServer) -> None:
    with TTSClient(server.grpc_url, timeout=120) as tts:
        native = tts.synthesize(TEXT_OF_THREE)
        chunks = list(tts.stream(TEXT_OF_THREE, sample_rate=16000))
    assert native.sample_rate == 22050 and {c.sample_rate for c in chunks} == {16000}
    streamed = np.concatenate([c.audio for c in chunks])
    whole = soxr.resample(native.audio, 22050, 16000, quality="HQ")  # the same audio resampled at once
    assert len(chunks) >= 2 and abs(len(streamed) - len(whole)) <= 1
    np.testing.assert_allclose(streamed[: len(whole)], whole[: len(streamed)], atol=1e-4)
    with HttpTTSClient(server.http_url, timeout=120) as http:
        offline = http.synthesize(TEXT_OF_THREE, sample_rate=8000)
    assert offline.sample_rate == 8000 and abs(len(offline.audio) - len(native.audio) * 8000 / 22050) <= 1


def test_unoffered_sample_rate_is_invalid_naming_the_input(server: TritonServer) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        text = grpcclient.InferInput(TEXT, [1], "BYTES")
        text.set_data_from_numpy(np.array([b"Hi."], dtype=object))
        rate = grpcclient.InferInput(OUTPUT_SAMPLE_RATE, [1], "INT32")
        rate.set_data_from_numpy(np.array([11025], np.int32))
        with pytest.raises(InferenceServerException) as caught:
            client.infer(TTS_OFFLINE, [text, rate])
    assert "OUTPUT_SAMPLE_RATE: 11025 Hz is not offered; one of 8000, 16000" in str(caught.value)


@pytest.mark.parametrize(("text", "language"), [("Bonjour, je m'appelle Marie et j'habite à Paris.", "French"),
                                                ("Привет, как дела? Меня зовут Иван.", "Russian")])
def test_text_that_is_not_english_is_refused_naming_the_language(server: TritonServer, text: str,
                                                                  language: str) -> None:
    with TTSClient(server.grpc_url, timeout=60) as tts, pytest.raises(InvalidInputError) as caught:
        tts.synthesize(text)
    assert f"TEXT: reads as {language}, not English" in str(caught.value)


def test_lexicon_is_applied_and_read_again_when_it_changes(server: TritonServer, lexicon_file: Path) -> None:
    """The served words of a lexicon entry are those of what it says: the same phonemes give the same audio."""
    with TTSClient(server.grpc_url, timeout=120) as tts:
        def said(text: str) -> np.ndarray:
            return tts.synthesize(text).audio

        before = said("Say zorblax.")
        lexicon_file.write_text("zorblax\tcat\n", encoding="utf-8")
        cat = said("Say cat.")
        assert not np.array_equal(before, cat)
        np.testing.assert_array_equal(said("Say zorblax."), cat)
        lexicon_file.write_text("zorblax\t/dˈɑːɡ/\n", encoding="utf-8")  # espeak-ng's own IPA of "dog"
        np.testing.assert_array_equal(said("Say zorblax."), said("Say dog."))
    lexicon_file.unlink()


#: Floods of the new readings (test_text_edges reads them in process); one request of them all gets audio.
HOSTILE = ["-" * 3000 + "10°C", "Chapter " + "X" * 3000, "Henry " + "VIII " * 600, "1-" * 1500 + "1",
           "10 / " * 600 + "2", "5¢" * 1500, "6'2\"" * 700, "9 km/h " * 400, "I " * 1500]


def test_hostile_readings_give_audio(server: TritonServer) -> None:
    with TTSClient(server.grpc_url, timeout=120) as tts:
        stream = tts.stream(" ".join(HOSTILE)[:19_000])  # within TEXT's limit
        assert next(stream).audio.size > 0
        stream.close()
        assert tts.is_ready()


def outcomes(server: TritonServer) -> dict[str, float]:
    """``tts_requests_total`` of ``tts`` by outcome."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r'^tts_requests_total\{model="tts",outcome="(\w+)"\} (\S+)$', text, re.M)
    return {outcome: float(count) for outcome, count in found}


def test_say_streams_into_a_pipe_and_stops_when_it_closes(server: TritonServer) -> None:
    before = outcomes(server)
    text = "9" * 5000  # read digit by digit: a stream far longer than the 1000 bytes read
    say = subprocess.Popen([TTS_TRITON, "say", "-o", "-", "--url", server.grpc_url], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    say.stdin.write(text.encode())  # `echo ... | tts-triton say -o - | head -c 1000`
    say.stdin.close()
    head = subprocess.run(["head", "-c", "1000"], stdin=say.stdout, capture_output=True, timeout=120)
    say.stdout.close()
    err = say.stderr.read().decode()
    assert say.wait(timeout=60) == 0 and "Traceback" not in err and "stopped: standard output was closed" in err
    assert head.stdout[:4] == b"RIFF" and len(head.stdout) == 1000
    deadline = time.monotonic() + 20
    while outcomes(server).get("stopped", 0) < before.get("stopped", 0) + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    after = outcomes(server)
    assert after.get("stopped", 0) == before.get("stopped", 0) + 1, (before, after)  # ended in-band by the server


def test_say_reads_a_text_file_and_writes_raw_pcm_at_a_chosen_rate(server: TritonServer, tmp_path: Path) -> None:
    (tmp_path / "text.txt").write_text(TEXT_OF_THREE + "\n", encoding="utf-8")
    raw = subprocess.run([TTS_TRITON, "say", "--text-file", str(tmp_path / "text.txt"), "-o", "-", "--raw",
                          "--sample-rate", "8000", "--url", server.grpc_url], capture_output=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert raw.returncode == 0, raw.stderr
    piped = subprocess.run([TTS_TRITON, "say", "-o", "-", "--sample-rate", "8000", "--url", server.grpc_url],
                           input=TEXT_OF_THREE.encode() + b"\n", capture_output=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    (tmp_path / "piped.wav").write_bytes(piped.stdout)
    with wave.open(str(tmp_path / "piped.wav")) as reader:  # the streaming header: sizes unknown
        assert reader.getframerate() == 8000
        frames = reader.readframes(10**7)
    assert frames == raw.stdout and len(raw.stdout) > 500
    empty = subprocess.run([TTS_TRITON, "say", "-o", "-", "--url", server.grpc_url], input=b"  \n",
                           capture_output=True, timeout=60)
    assert (empty.returncode, empty.stderr.decode().strip()) == (1, "error: standard input is empty: nothing to speak")
