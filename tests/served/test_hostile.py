"""Hostile input against a real tritonserver: clear errors or audio, never an internal failure, and the
internal surfaces closed: digit floods, oversized direct calls to the network models,
requests Triton rejects before the model, and the restricted control APIs."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from conftest import stub_pid
from tritonclient.utils import InferenceServerException

from tts_triton.client import ServerUnavailableError, TTSClient
from tts_triton.client.grpc_client import STOP_WAIT_S
from tts_triton.core import contract
from tts_triton.core.config import ModelConfig
from tts_triton.core.shapes import axis_values
from tts_triton.processes.health import smallest_inputs
from tts_triton.processes.triton_server import TritonServer
from tts_triton.text.numbers import expand_numbers

DIGIT_FLOODS = ["$" + "9" * 5000, "9" * 5000 + "th", "9" * 5000 + "." + "9" * 5000, "-" + "9" * 6000,
                "£" + "9" * 5000 + ".99", "9" * 5000 + "km"]


@pytest.mark.parametrize("text", DIGIT_FLOODS, ids=lambda t: f"{t[:3]}...{t[-3:]}")
def test_digit_floods_are_read_digit_by_digit(text: str) -> None:
    words = expand_numbers(text).split()
    assert words.count("nine") >= 5000 and not any(ch.isdigit() for ch in "".join(words))


@pytest.mark.parametrize("text", DIGIT_FLOODS[:2], ids=["dollar-nines", "nines-th"])
def test_digit_flood_is_spoken_not_an_internal_error(server: TritonServer, text: str) -> None:
    with TTSClient(server.grpc_url, timeout=120) as tts:
        stream = tts.stream(text)
        assert next(stream).audio.size > 0
        stream.close()
        assert tts.is_ready()


# --- Direct calls to the network models: shapes beyond what the BLS sends get INVALID_ARG. ---

def network_config(server: TritonServer, model: str) -> dict[str, Any]:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        return client.get_model_config(model, as_json=True)["config"]


def resized(config: dict[str, Any], batch: int, sizes: dict[str, int],
            only: str | None = None) -> dict[str, np.ndarray]:
    """The smallest inputs with ``batch`` rows and the named axes set to ``sizes`` (in input ``only``, if given)."""
    names = json.loads(config["parameters"]["input_axes"]["string_value"])
    out = {}
    for name, array in smallest_inputs(config).items():
        shape = [batch] + [sizes.get(a, d) if a and only in (None, name) else d
                           for a, d in zip(names[name], array.shape[1:], strict=True)]
        out[name] = np.zeros(shape, array.dtype)
    return out


def private_memory_mib(pid: int) -> float:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["RssAnon"].split()[0]) / 1024


REF_HIGH = axis_values()[contract.REF_FRAMES].high
OVERSIZED = [
    (contract.TEXT_ENCODER, 16, {contract.TOKENS: 4096}, None, "tokens = 4096"),
    (contract.TEXT_ENCODER, 1, {contract.TOKENS: 100}, None, "tokens = 100"),
    (contract.STYLE_ENCODER, 16, {contract.REF_FRAMES: REF_HIGH + 5000}, None, f"ref_frames = {REF_HIGH + 5000}"),
    (contract.DECODER, 8, {contract.TOKENS: 4096}, None, "tokens = 4096"),
    (contract.DECODER, 1, {contract.TOKENS: 64}, "mask", "differs"),
    (contract.VOCODER, 16, {contract.FRAMES: 4000}, None, "frames = 4000"),
    (contract.VOCODER, 1, {contract.FRAMES: 20000}, None, "frames = 20000"),
]


@pytest.mark.parametrize(("model", "batch", "sizes", "only", "message"), OVERSIZED,
                         ids=[f"{m}-{b}x{list(s.values())[0]}{'-' + o if o else ''}" for m, b, s, o, _ in OVERSIZED])
def test_oversized_direct_call_is_invalid_arg_without_memory_growth(
        server: TritonServer, model: str, batch: int, sizes: dict[str, int], only: str | None, message: str) -> None:
    config = network_config(server, model)
    inputs = resized(config, batch, sizes, only)
    pid = stub_pid(server, model)
    before = private_memory_mib(pid)
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        tensors = []
        for name, array in inputs.items():
            tensor = grpcclient.InferInput(name, list(array.shape), contract.WIRE_DTYPES[str(array.dtype)])
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        start = time.monotonic()
        with pytest.raises(InferenceServerException) as caught:
            client.infer(model, tensors, client_timeout=60)
        seconds = time.monotonic() - start
    assert "INVALID_ARG" in str(caught.value.status()), caught.value
    assert message in caught.value.message()
    grown = private_memory_mib(pid) - before
    shapes = [list(a.shape) for a in inputs.values()]
    print(f"{model} {shapes[0]}: rejected in {seconds:.2f} s, worker +{grown:.1f} MiB")
    # The stub may map a copy of the request's inputs (Triton's shared memory); nothing beyond that may grow.
    received = sum(a.nbytes for a in inputs.values()) / 2**20
    assert grown < 16 + received, f"{model} worker grew by {grown:.0f} MiB for {received:.0f} MiB of inputs"
    assert seconds < 10, f"rejected only after {seconds:.1f} s"


def test_smallest_shapes_still_run(server: TritonServer) -> None:
    """Each network answers the smallest request the BLS sends (batch 1, every axis at its low end) with every
    output of the contract: of batch 1 where the network batches, and finite."""
    specs = contract.network_specs(ModelConfig())
    answered = {}
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        for model, spec in specs.items():
            config = network_config(server, model)
            tensors = []
            for name, array in smallest_inputs(config).items():
                tensor = grpcclient.InferInput(name, list(array.shape), contract.WIRE_DTYPES[str(array.dtype)])
                tensor.set_data_from_numpy(array)
                tensors.append(tensor)
            result = client.infer(model, tensors, client_timeout=60)
            batched = config.get("max_batch_size", 0) > 0
            outputs = {name: result.as_numpy(name) for name in spec.output_names}
            answered[model] = {name: out is not None and out.size > 0 and (not batched or out.shape[0] == 1)
                               and bool(np.isfinite(out).all()) for name, out in outputs.items()}
    assert answered == {model: dict.fromkeys(spec.output_names, True) for model, spec in specs.items()}


# --- Which stream errors end with a FINAL response (docs/contract.md, "Errors and the FINAL flag"). ---

def text_input(dtype: str = "BYTES", name: str = "TEXT") -> grpcclient.InferInput:
    value = np.array([b"Hello."], dtype=np.object_) if dtype == "BYTES" else np.array([1], dtype=np.int32)
    tensor = grpcclient.InferInput(name, [1], dtype)
    tensor.set_data_from_numpy(value)
    return tensor


#: case -> (inputs, requested outputs, a word of the error, whether a FINAL follows the error).
#: Triton rejects the first three before the model runs: one error, no FINAL. The model answers the last.
STREAM_ERRORS = {
    "wrong-dtype": ([text_input("INT32")], None, "TEXT", False),
    "unknown-input": ([text_input(), text_input(name="NOPE")], None, "NOPE", False),
    "unknown-output": ([text_input()], [grpcclient.InferRequestedOutput("NOPE")], "NOPE", False),
    "missing-text": ([text_input(name="VOICE")], None, "TEXT", True),
}


@pytest.mark.parametrize("case", STREAM_ERRORS)
def test_stream_error_ends_with_final_only_when_the_model_answered(server: TritonServer, case: str) -> None:
    inputs, outputs, name, final_expected = STREAM_ERRORS[case]
    errors: list[Exception] = []
    finals: list[Any] = []
    first = threading.Event()

    def callback(result: Any, error: Exception | None) -> None:
        if error is not None:
            errors.append(error)
        elif result.get_response().parameters["triton_final_response"].bool_param:
            finals.append(result)
        first.set()

    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        client.start_stream(callback)
        client.async_stream_infer(contract.TTS, inputs, outputs=outputs, enable_empty_final_response=True)
        assert first.wait(30), "no answer"
        time.sleep(2)  # a FINAL follows an error at once when it comes at all
        answers, ended = [str(e) for e in errors], len(finals)
        client.stop_stream(cancel_requests=True)
        assert client.is_server_ready()
    assert len(answers) == 1 and name in answers[0], answers
    assert ended == int(final_expected)


def test_the_client_waits_for_no_final_after_tritons_own_refusal(server: TritonServer) -> None:
    """Triton's own refusal (here of an unknown model) carries no mark and no FINAL follows it: the client raises at
    once, instead of waiting STOP_WAIT_S for a FINAL and then cancelling the stream."""
    with TTSClient(server.grpc_url, model="no_such_model", retries=0) as client:
        start = time.monotonic()
        with pytest.raises(ServerUnavailableError, match="no_such_model"):
            list(client.stream("Hello."))
        assert time.monotonic() - start < STOP_WAIT_S
    with TTSClient(server.grpc_url) as client:
        assert client.is_ready()


# --- Control APIs: refused without the admin header, over gRPC and HTTP. ---

def test_shared_memory_and_log_control_are_refused_without_the_admin_header(server: TritonServer) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url) as grpc:
        for call in (lambda **h: grpc.register_system_shared_memory("r", "triton_python_backend_shm_region_1", 64, **h),
                     lambda **h: grpc.update_log_settings({"log_verbose_level": 2}, **h),
                     lambda **h: grpc.get_log_settings(**h),
                     lambda **h: grpc.unload_model(contract.VOCODER, **h)):
            with pytest.raises(InferenceServerException, match="restricted"):
                call()
        grpc.get_log_settings(headers=server.admin_headers(grpc=True))  # the operator's key opens it
        assert grpc.is_model_ready(contract.VOCODER)
    with httpclient.InferenceServerClient(server.http_url) as http:
        for call in (lambda: http.register_system_shared_memory("r", "triton_python_backend_shm_region_1", 64),
                     lambda: http.update_log_settings({"log_verbose_level": 2})):
            with pytest.raises(InferenceServerException, match="restricted"):
                call()
        http.get_log_settings(headers=server.admin_headers())
        assert http.is_server_ready()


# --- Hostile SSML: INVALID_ARG naming TEXT within a second, nothing read from disk, the server ready after. ---

def _laughs() -> str:
    entities = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    return f'<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY lol0 "lol">{entities}]><speak>&lol9;</speak>'


#: case -> (markup, a phrase of the error). Two cases are longer than the TEXT limit, which answers first;
#: each has a twin within it that reaches the parser's own bound.
HOSTILE_SSML = {
    "billion-laughs": (_laughs(), "may not hold a DTD"),
    "external-entity": ('<!DOCTYPE speak [<!ENTITY s SYSTEM "file://{fifo}">]><speak>&s;</speak>',
                        "may not hold a DTD"),
    "external-dtd": ('<!DOCTYPE speak SYSTEM "file://{fifo}"><speak>hi</speak>', "may not hold a DTD"),
    "10k-deep": ("<speak>" + "<s>" * 10_000 + "hi" + "</s>" * 10_000 + "</speak>", "characters; the limit is"),
    "2k-deep": ("<speak>" + "<s>" * 2_000 + "hi" + "</s>" * 2_000 + "</speak>", "levels of nesting"),
    "100k-elements": ("<speak>" + "<break/>" * 100_000 + "</speak>", "characters; the limit is"),
    "2k-elements": ("<speak>" + "<break/>" * 2_001 + "</speak>", "elements"),
    "malformed": ("<speak>Hello <s>world</speak>", "malformed SSML: mismatched tag: line 1, column 23"),
}


@pytest.mark.parametrize("case", HOSTILE_SSML)
def test_hostile_ssml_is_invalid_arg_within_a_second(server: TritonServer, tmp_path: Path, case: str) -> None:
    fifo = tmp_path / "secret"  # a parser that opened it would block; a writer can open it only while one does
    os.mkfifo(fifo)
    markup, phrase = HOSTILE_SSML[case]
    text = grpcclient.InferInput(contract.TEXT, [1], "BYTES")
    text.set_data_from_numpy(np.array([markup.format(fifo=fifo).encode()], dtype=np.object_))
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        start = time.monotonic()
        with pytest.raises(InferenceServerException) as caught:
            client.infer(contract.TTS_OFFLINE, [text], client_timeout=30)
        seconds = time.monotonic() - start
        assert client.is_server_ready() and client.is_model_ready(contract.TTS)
    assert "INVALID_ARG" in str(caught.value.status()), caught.value
    assert caught.value.message().startswith("TEXT: ") and phrase in caught.value.message(), caught.value.message()
    assert seconds < 1.0, f"answered after {seconds:.2f} s"
    with pytest.raises(OSError):  # ENXIO: nobody has the FIFO open for reading
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# --- Floods of the readings added for issue 36: read in linear time, each in words (the served request of all of
# them is in test_edges_served). ---

READING_FLOODS = {
    "signs": ("-" * 5000 + "10°C", "minus ten degrees Celsius"),
    "numerals": ("Chapter " + "X" * 5000, "Chapter"),
    "names": ("Henry " + "VIII " * 2000, "Henry the eighth"),
    "ranges": ("1-" * 3000 + "1", "one"),
    "slashes": ("10 / " * 2000 + "2", "ten divided by ten"),
    "cents": ("5¢" * 3000, "five cents five cents"),
    "feet": ("6'2\"" * 1500, "six feet two inches"),
    "units": ("9 km/h " * 1500, "nine kilometers per hour"),
}


@pytest.mark.parametrize("name", READING_FLOODS)
def test_reading_floods_are_read_in_words(name: str) -> None:
    from tts_triton.text import normalize

    text, start = READING_FLOODS[name]
    words = normalize(text)
    assert start in words and not any(ch.isdigit() for ch in words) and len(words) < 30 * len(text)


def test_a_clause_espeak_reads_otherwise_in_context_is_shared_out_at_once() -> None:
    """espeak-ng reads "VIII VIII ..." in context unlike each word alone: the words' symbols are then shared out
    in proportion beyond a bounded alignment (it took 22 s for 400 such words, growing with their square)."""
    from tts_triton.text import plan_text

    sentences = plan_text("Then " + "VIII " * 400 + "ended.", 400)
    assert len({(w.start, w.end) for s in sentences for w in s.words}) == 402


def test_language_check_and_lexicon_bear_floods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tts_triton.text import lexicon
    from tts_triton.text.language import detect
    from tts_triton.text.lexicon import Lexicon, LexiconError

    assert detect("le " * 20000)[0] == "French" and detect("你" * 20000 + "a" * 19999)[0] == "Chinese"
    assert detect("\u0301" * 20000 + "the cat sat on the mat")[0] == "English"
    monkeypatch.setattr(lexicon, "MAX_ENTRIES", 100)
    path = tmp_path / "big.tsv"
    path.write_text("".join(f"w{chr(97 + i % 26)}{chr(97 + i // 26)}\tcat\n" for i in range(101)), encoding="utf-8")
    with pytest.raises(LexiconError, match="line 101: more than 100 entries"):
        Lexicon.load(path)
    path.write_text("cat\t" + "a" * 1_000_000 + "#\n", encoding="utf-8")
    with pytest.raises(LexiconError) as caught:
        Lexicon.load(path)
    assert len(str(caught.value)) < 400
