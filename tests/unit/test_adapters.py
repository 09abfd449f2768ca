"""The three Triton adapters (the BLS, the ONNX model, the torch model) without a server, over a fake
``triton_python_backend_utils`` (tests/fake_pb_utils.py): outcome counting, status mapping, FINAL after every
error, in-band stop, admission, per-request retry and shape rejection. The networks behind the BLS run in
process (the seeded test checkpoint), so each test takes milliseconds to a second."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import fake_pb_utils as fake
import numpy as np
import pytest
from conftest import TINY
from google.protobuf import json_format

from tts_triton.core import contract
from tts_triton.core.config import ModelConfig
from tts_triton.core.layout import CHECKPOINT_FILE, MAX_STREAMS
from tts_triton.core.shapes import axis_values
from tts_triton.core.voices import from_styles
from tts_triton.export import repository as repo_mod
from tts_triton.export.pbtxt import parse, render
from tts_triton.model_instance import lifecycle
from tts_triton.model_instance.lifecycle import STOP_PARAMETER, CancelPoll, StopBoard
from tts_triton.models.checkpoint import Checkpoint, init_checkpoint
from tts_triton.triton.utils import CallThreads

TEXT = "The quick brown fox. It was sunny!"


#: Decoder calls per sentence of :class:`ScriptedNetworks`.
CALLS_PER_SENTENCE = 3


@pytest.fixture(scope="module")
def checkpoint() -> Checkpoint:
    """Untrained weights of the tiny config (the torch model's stage)."""
    return init_checkpoint(TINY, seed=3)


class ScriptedNetworks:
    """Stand-ins for the networks behind the BLS (the adapter, not the networks, is under test): outputs of the
    contract's shapes, zeros but for the decoder, whose state counts its calls and whose gate fires on the
    sentence's :data:`CALLS_PER_SENTENCE`-th call."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.specs = {**contract.network_specs(cfg), **contract.ensemble_specs(cfg)}
        self.hop = cfg.vocoder.hop_length

    def outputs(self, name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        spec = self.specs[name]
        sizes = {d: size for t in spec.inputs if t.name in inputs
                 for d, size in zip(t.dims, inputs[t.name].shape[1:], strict=True) if isinstance(d, str)}
        if contract.FRAMES in sizes:
            sizes[contract.SAMPLES] = sizes[contract.FRAMES] * self.hop
        batch = next(iter(inputs.values())).shape[0]
        out = {t.name: np.zeros((batch, *(sizes.get(d, d) for d in t.dims)), t.dtype) for t in spec.outputs}
        if contract.GATE in out:  # the decoder, alone or in an ensemble
            calls = inputs["state"][:, :1] + 1
            out["state_out"][:] = calls
            out["gate"][:] = np.where(calls >= CALLS_PER_SENTENCE, 1.0, -1.0)
        return out


@pytest.fixture
def pb(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The fake installed where the adapters look for ``triton_python_backend_utils``."""
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    for registry in (fake.CHILDREN, fake.METRICS):
        registry.clear()
    fake.LOGGED.clear()
    for name in ("utils", "onnx_model", "torch_model", "bls"):
        module = importlib.import_module(f"tts_triton.triton.{name}")
        monkeypatch.setattr(module, "pb_utils", fake)
    return fake


def triton_json(config: dict[str, Any]) -> dict[str, Any]:
    """A generated config as Triton hands it to a Python model (``args["model_config"]``)."""
    return json_format.MessageToDict(parse(render(config)), preserving_proto_field_name=True)


def text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=np.object_)


# --- the BLS --------------------------------------------------------------------------------------------------


@pytest.fixture
def bls(pb: Any, checkpoint: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """``make(decoupled=True, max_streams=0, instances=1, call_threads=0)`` -> an initialized BLS model whose child
    calls run the checkpoint's networks in process; ``calls`` counts them by model."""
    from tts_triton.triton import bls as bls_module

    monkeypatch.setattr(bls_module, "StopBoard", lambda: StopBoard(tmp_path / "stops"))
    networks = ScriptedNetworks(checkpoint.config)
    calls: dict[str, int] = {}

    def child(name: str) -> Any:
        async def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            for network in contract.ENSEMBLES.get(name, (name,)):
                calls[network] = calls.get(network, 0) + 1
            await asyncio.sleep(0)  # a real BLS call yields to the other requests
            return networks.outputs(name, inputs)
        return run

    for name in networks.specs:
        pb.CHILDREN[name] = child(name)
    bank = from_styles({("f1", "neutral"): np.zeros(checkpoint.config.style.dim)}, "f1", "neutral")
    models = []

    def make(decoupled: bool = True, max_streams: int = 0, instances: int = 1, call_threads: int = 0) -> Any:
        name = contract.TTS if decoupled else contract.TTS_OFFLINE
        settings = repo_mod.RepositorySettings(bls_instances=instances, max_streams=max_streams,
                                               bls_call_threads=call_threads)
        params = repo_mod.bls_parameters(checkpoint.config, bank, settings, "test")
        config = repo_mod._bls_config(contract.tts_spec(checkpoint.config, name), decoupled, params, settings)
        model = bls_module.TritonPythonModel()
        model.initialize({"model_config": json.dumps(triton_json(config)), "model_instance_name": f"{name}_0_0"})
        models.append(model)
        return model

    make.calls = calls
    yield make
    for model in models:
        model.finalize()


def run(model: Any, *requests: fake.Request) -> None:
    asyncio.run(asyncio.wait_for(model.execute(list(requests)), 60))


def outcomes(model: str = contract.TTS) -> dict[str, float]:
    return {o: fake.metric("tts_requests_total", model=model, outcome=o) for o in ("completed", "stopped",
            "cancelled", "timed_out", "refused", "invalid_input", "failed")}


def assert_ends_with_one_final(request: fake.Request) -> None:
    assert request.sender.finals == 1 and request.sender.sent[-1][1] == fake.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def test_bls_stream_completes_with_audio_then_final(bls: Any) -> None:
    model = bls()
    request = fake.Request({"TEXT": text(TEXT)})
    active_at_final = []
    send = request.sender.send

    def watched(response: Any = None, flags: int = 0) -> None:
        if flags & fake.TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            active_at_final.append(model.admission.active)
        send(response, flags)

    request.sender.send = watched
    run(model, request)
    assert_ends_with_one_final(request)
    assert not request.sender.errors, [e.message() for e in request.sender.errors]
    audio = [r.tensors["AUDIO"].as_numpy() for r in request.sender.responses]
    assert len(audio) >= 2 and all(a.size for a in audio) and not request.sender.errors
    assert request.sender.sent[-1][0] is not None  # the last chunk carries the FINAL: no empty response after it
    assert active_at_final == [0]  # the request had left admission: the client's next one is not refused
    assert outcomes()["completed"] == 1
    assert fake.metric("tts_active_requests", model="tts", instance="tts_0_0") == 0


@pytest.mark.parametrize(("inputs", "named"), [
    ({"TEXT": text("   ")}, "TEXT"),
    ({}, "TEXT"),
    ({"TEXT": text("Hi."), "VOICE": text("nobody")}, "VOICE"),
    ({"TEXT": text("Hi."), "REFERENCE_AUDIO": np.zeros(16000, np.float32)}, "REFERENCE_SAMPLE_RATE"),
])
def test_bls_bad_input_is_invalid_arg_naming_it_then_final(bls: Any, inputs: dict, named: str) -> None:
    model = bls()
    request = fake.Request(inputs)
    run(model, request)
    assert_ends_with_one_final(request)
    (error,) = request.sender.errors
    assert error.code() == fake.TritonError.INVALID_ARG and named in error.message()
    assert outcomes()["invalid_input"] == 1


def test_bls_child_failure_is_internal_then_final(bls: Any) -> None:
    model = bls()

    async def broken(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise RuntimeError("decoder stub died")

    fake.CHILDREN[contract.DECODER] = broken
    request = fake.Request({"TEXT": text(TEXT)})
    run(model, request)
    assert_ends_with_one_final(request)
    (error,) = request.sender.errors
    assert error.code() == fake.TritonError.INTERNAL and "synthesis failed" in error.message()
    assert "decoder stub died" in error.message()
    assert outcomes()["failed"] == 1
    assert any(level == "error" for level, _ in fake.LOGGED)


def decoder_hook(bls: Any, after_calls: int, action: Any) -> None:
    """Run ``action()`` once, before the decoder call number ``after_calls`` + 1 (the first is a sentence's
    ``first_decode``)."""
    def hook(inner: Any) -> Any:
        async def hooked(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            if bls.calls.get(contract.DECODER, 0) == after_calls:
                result = action()
                if asyncio.iscoroutine(result):
                    await result
            return await inner(inputs)
        return hooked

    for name in (contract.DECODER, contract.FIRST_DECODE):
        fake.CHILDREN[name] = hook(fake.CHILDREN[name])



def test_call_threads_carry_more_calls_at_once_than_pythons_default_pool() -> None:
    parties = 40  # above Python's default executor on any host (cpu_count + 4 threads, at most 32)
    barrier = threading.Barrier(parties, timeout=20)  # broken unless every call runs at the same time
    calls = CallThreads(parties)

    async def main() -> list[int]:
        calls.install()
        loop = asyncio.get_running_loop()
        return await asyncio.gather(*(loop.run_in_executor(None, barrier.wait) for _ in range(parties)))

    try:
        arrivals = asyncio.run(main())
    finally:
        calls.close()
    assert sorted(arrivals) == list(range(parties))  # each call passed the barrier: all were waiting at once


@pytest.mark.parametrize(("decoupled", "call_threads", "pool"), [
    (True, 0, "asyncio"),  # tts: the stub's default executor, below the server's pool of 32 (CallThreads)
    (True, 8, "bls-call"),
    (False, 0, "bls-call"),  # tts_offline: its own loop, always its own pool
])
def test_bls_calls_run_on_the_configured_thread_pool(bls: Any, decoupled: bool, call_threads: int, pool: str) -> None:
    """The real stub runs each async_exec on the loop's default executor: bls_call_threads installs CallThreads."""
    threads: list[str] = []

    async def note_the_executor() -> None:
        threads.append(await asyncio.get_running_loop().run_in_executor(None, lambda: threading.current_thread().name))

    decoder_hook(bls, 0, note_the_executor)
    model = bls(decoupled=decoupled, call_threads=call_threads)
    request = fake.Request({"TEXT": text(TEXT)})
    if decoupled:
        run(model, request)
    else:
        assert model.execute([request]) is None
        deadline = time.monotonic() + 60
        while not request.sender.finals and time.monotonic() < deadline:
            time.sleep(0.01)
    assert_ends_with_one_final(request)
    assert threads and threads[0].startswith(pool), threads


def test_bls_cancel_mid_stream_ends_with_final_and_no_error(bls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "CANCEL_POLL_S", 0.0)  # asked at every decoder call: this stream is over in ms
    model = bls()
    request = fake.Request({"TEXT": text(TEXT)})
    decoder_hook(bls, 2, lambda: setattr(request, "cancelled", True))
    run(model, request)
    assert_ends_with_one_final(request)
    assert not request.sender.errors
    assert outcomes()["cancelled"] == 1


def test_a_cancel_poll_asks_once_per_interval_and_keeps_a_cancel() -> None:
    asked = []

    def ask() -> bool:
        asked.append(time.monotonic())
        return len(asked) == 2

    poll = CancelPoll(ask, every=0.05)
    assert not poll() and not asked  # not asked before the first interval passed
    time.sleep(0.06)
    assert not poll() and not poll() and len(asked) == 1
    time.sleep(0.06)
    assert poll() and len(asked) == 2
    time.sleep(0.06)
    assert poll() and len(asked) == 2  # a cancel stays without asking again


def test_bls_in_band_stop_ends_the_named_stream_with_a_normal_final(bls: Any) -> None:
    model = bls(instances=2)
    other = bls(instances=2)  # the stop may reach another instance of the model
    request = fake.Request({"TEXT": text(TEXT + " " + TEXT)}, request_id="a1b2")
    stop = fake.Request({"TEXT": text("")}, parameters={STOP_PARAMETER: "a1b2"})
    decoder_hook(bls, 2, lambda: other.execute([stop]))
    run(model, request)
    assert_ends_with_one_final(request)
    assert_ends_with_one_final(stop)
    assert not request.sender.errors and not stop.sender.errors
    assert 3 <= bls.calls[contract.DECODER] <= 4  # stopped at the decoder call after the stop
    assert outcomes()["stopped"] == 1 and outcomes()["completed"] == 0
    assert not model.stops.posted("a1b2"), "the stream clears its stop when it ends"


def test_bls_stop_with_a_bad_id_is_invalid_arg(bls: Any) -> None:
    model = bls()
    stop = fake.Request({"TEXT": text("")}, parameters={STOP_PARAMETER: "../../etc/passwd"})
    run(model, stop)
    assert_ends_with_one_final(stop)
    (error,) = stop.sender.errors
    assert error.code() == fake.TritonError.INVALID_ARG and STOP_PARAMETER in error.message()


def test_bls_time_limit_is_unavailable_then_final(bls: Any) -> None:
    model = bls()
    request = fake.Request({"TEXT": text(TEXT)}, timeout_us=1)
    run(model, request)
    assert_ends_with_one_final(request)
    (error,) = request.sender.errors
    assert error.code() == fake.TritonError.UNAVAILABLE and "time limit" in error.message()
    assert outcomes()["timed_out"] == 1


def test_bls_admission_refuses_past_the_bound_at_once(bls: Any) -> None:
    model = bls(max_streams=2, instances=2)  # the bound holds over all instances, not per instance
    requests = [fake.Request({"TEXT": text(f"Stream {i} talks.")}) for i in range(3)]
    run(model, *requests)
    for request in requests:
        assert_ends_with_one_final(request)
    refused = [r for r in requests if r.sender.errors]
    assert len(refused) == 1 and not refused[0].sender.responses[:-1]
    error = refused[0].sender.errors[0]
    assert error.code() == fake.TritonError.UNAVAILABLE and "server busy" in error.message()
    assert "limit of 2" in error.message() and MAX_STREAMS in error.message()
    assert outcomes()["refused"] == 1 and outcomes()["completed"] == 2
    run(model, fake.Request({"TEXT": text("Room again.")}))  # the share is free again
    assert outcomes()["completed"] == 3


def test_bls_active_gauge_restarts_from_zero_with_its_stub(bls: Any) -> None:
    bls()
    # a stub that died with requests in flight leaves its series behind (Triton keeps the metric)
    fake.METRICS[("tts_active_requests", (("instance", "tts_0_0"), ("model", "tts")))].set(3)
    bls()  # the restarted stub of the same instance
    assert fake.metric("tts_active_requests", model="tts", instance="tts_0_0") == 0


def test_bls_offline_answers_once_with_final(bls: Any) -> None:
    model = bls(decoupled=False)
    good, bad = fake.Request({"TEXT": text("Hello there.")}), fake.Request({"TEXT": text("")})
    assert model.execute([good, bad]) is None
    deadline = time.monotonic() + 60
    while (good.sender.finals + bad.sender.finals < 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    for request in (good, bad):
        assert len(request.sender.sent) == 1 and request.sender.finals == 1
    assert good.sender.responses[0].tensors["AUDIO"].as_numpy().size > 0 and not good.sender.errors
    assert bad.sender.errors[0].code() == fake.TritonError.INVALID_ARG
    assert outcomes(contract.TTS_OFFLINE)["completed"] == 1 and outcomes(contract.TTS_OFFLINE)["invalid_input"] == 1


def test_bls_offline_joins_and_sends_its_response_off_its_loop(bls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    model = bls(decoupled=False)
    request = fake.Request({"TEXT": text(TEXT)}, requested=["AUDIO", "MEL"])
    threads: dict[str, str] = {}
    join, send = model.offline_response, request.sender.send

    def joined(*args: Any) -> Any:
        threads["join"] = threading.current_thread().name
        return join(*args)

    def sent(*args: Any, **kwargs: Any) -> None:
        threads["send"] = threading.current_thread().name
        send(*args, **kwargs)

    monkeypatch.setattr(model, "offline_response", joined)
    monkeypatch.setattr(request.sender, "send", sent)
    assert model.execute([request]) is None
    deadline = time.monotonic() + 60
    while not request.sender.finals and time.monotonic() < deadline:
        time.sleep(0.01)
    assert_ends_with_one_final(request)
    assert model.loop_thread.name == "tts-offline"
    assert threads["join"].startswith("bls-call") and threads["send"].startswith("bls-call"), threads
    response = request.sender.responses[0]
    assert response.tensors["AUDIO"].as_numpy().size > 0 and response.tensors["MEL"].as_numpy().shape[1] > 0


# --- the network models ---------------------------------------------------------------------------------------


def network_config(name: str, target: str, checkpoint: Any) -> dict[str, Any]:
    runtime = repo_mod.RUNTIME_TARGETS[target]
    settings = repo_mod.RepositorySettings(instance_kind=repo_mod.KIND_CPU)
    spec = contract.network_specs(checkpoint.config)[name]
    return triton_json(repo_mod._network_config(spec, runtime, settings, checkpoint.config))


def vocoder_inputs(checkpoint: Any, batch: int = 1, frames: int | None = None) -> dict[str, np.ndarray]:
    frames = frames or axis_values()[contract.FRAMES].buckets[0]
    rng = np.random.default_rng(batch)
    return {"mel": rng.standard_normal((batch, frames, checkpoint.config.n_mels)).astype(np.float32)}


@pytest.fixture
def torch_model(pb: Any, checkpoint: Any, tmp_path: Path) -> Any:
    from tts_triton.triton import torch_model as module

    (tmp_path / "1").mkdir()
    checkpoint.save(tmp_path / "1" / CHECKPOINT_FILE)
    model = module.TritonPythonModel()
    config = network_config(contract.VOCODER, "torch-cuda", checkpoint)
    model.initialize({"model_config": json.dumps(config), "model_name": contract.VOCODER,
                      "model_repository": str(tmp_path), "model_version": "1", "model_instance_kind": "CPU"})
    yield model
    model.finalize()


def test_torch_model_rejects_bad_shapes_alone_and_answers_the_rest(torch_model: Any, checkpoint: Any) -> None:
    good = fake.Request(vocoder_inputs(checkpoint, 2), requested=["audio"])
    odd_frames = fake.Request(vocoder_inputs(checkpoint, 1, frames=7))
    missing = fake.Request({})
    responses = torch_model.execute([odd_frames, good, missing])
    assert [r.has_error() for r in responses] == [True, False, True]
    assert responses[0].error().code() == fake.TritonError.INVALID_ARG
    assert "vocoder:" in responses[0].error().message() and "frames = 7" in responses[0].error().message()
    assert "'mel' is missing" in responses[2].error().message()
    assert responses[1].tensors["audio"].as_numpy().shape[0] == 2


def test_torch_model_device_failure_is_internal_for_every_accepted_request(
        torch_model: Any, checkpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(torch_model._runner, "run", broken)
    bad = fake.Request(vocoder_inputs(checkpoint, 1, frames=7))
    responses = torch_model.execute([fake.Request(vocoder_inputs(checkpoint)), bad])
    assert responses[0].error().code() == fake.TritonError.INTERNAL
    assert "illegal memory" in responses[0].error().message()
    assert responses[1].error().code() == fake.TritonError.INVALID_ARG


class PoisonedSession:
    """An ONNX Runtime session stand-in that fails any call holding a NaN and doubles its input otherwise."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        mel = feed["mel"]
        self.calls.append(mel.shape[0])
        if np.isnan(mel).any():
            raise RuntimeError("non-finite input")
        return [mel[..., 0].repeat(2, axis=1) * 2]


def test_onnx_model_retries_a_failed_batch_request_by_request(pb: Any, checkpoint: Any) -> None:
    from tts_triton.model_instance.request_shapes import RequestShapes
    from tts_triton.triton import onnx_model

    model = onnx_model.TritonPythonModel()
    config = network_config(contract.VOCODER, "onnxruntime-python", checkpoint)
    model._name, model._batched, model._session = contract.VOCODER, True, PoisonedSession()
    model._input_names, model._output_names, model._shapes = ["mel"], ["audio"], RequestShapes(config)
    poisoned = vocoder_inputs(checkpoint)
    poisoned["mel"][0, 0, 0] = np.nan
    requests = [fake.Request(vocoder_inputs(checkpoint)), fake.Request(poisoned),
                fake.Request(vocoder_inputs(checkpoint, 2)), fake.Request(vocoder_inputs(checkpoint, 1, frames=7))]
    responses = model.execute(requests)
    assert [r.has_error() for r in responses] == [False, True, False, True]
    assert model._session.calls == [4, 1, 1, 2]  # the batch of three requests, then each alone
    assert responses[1].error().code() == fake.TritonError.INTERNAL and "non-finite" in responses[1].error().message()
    assert responses[3].error().code() == fake.TritonError.INVALID_ARG
    np.testing.assert_allclose(responses[2].tensors["audio"].as_numpy(),
                               requests[2].tensors["mel"].as_numpy()[..., 0].repeat(2, axis=1) * 2)


def test_bls_sends_its_metrics_once_when_its_last_stream_ends(bls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each metric update is a round trip to the server: streams ending together update each metric once."""
    model = bls()
    model.metrics.every = 60.0  # however slow this machine, no interval ends during the run
    sent: list[float] = []
    increment = fake.Metric.increment
    monkeypatch.setattr(fake.Metric, "increment", lambda self, value: (sent.append(value), increment(self, value)))
    run(model, *(fake.Request({"TEXT": text(f"Stream {i} talks.")}) for i in range(3)))
    assert outcomes()["completed"] == 3 and sent == [3.0]  # the active gauge's +3 and -3 cancel out: no update
    assert fake.metric("tts_active_requests", model="tts", instance="tts_0_0") == 0
