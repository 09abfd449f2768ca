"""The Triton-free core: chunk planning, stop rule, max-steps guard, seams, request validation."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import subprocess
import sys
import threading

import numpy as np
import pytest

from tts_triton.core import audio, contract
from tts_triton.core.config import STREAMING, ModelConfig, StreamingConfig
from tts_triton.core.voices import from_styles
from tts_triton.errors import Cancelled, InvalidInput
from tts_triton.serving import service
from tts_triton.serving.pipeline import ChunkPlanner, Pipeline, first_stop
from tts_triton.serving.service import StyleCache, SynthesisRequest, TTSService, parse_request


def plan(available_steps: list[int], streaming: StreamingConfig = STREAMING) -> list:
    """Windows emitted while frames arrive in the given increments, then at the end."""
    planner, total, windows = ChunkPlanner(streaming), 0, []
    for n in available_steps:
        total += n
        while (w := planner.next_window(total, finished=False)) is not None:
            windows.append(w)
    while (w := planner.next_window(total, finished=True)) is not None:
        windows.append(w)
    return windows


@pytest.mark.parametrize("arrivals", [[16] * 20, [5, 300], [1] * 7, [1000], [16, 16, 16]])
def test_chunks_cover_every_frame_once_with_context(arrivals: list[int]) -> None:
    windows = plan(arrivals)
    total = sum(arrivals)
    assert windows[0].start == 0 and windows[-1].end == total
    for a, b in zip(windows, windows[1:], strict=False):
        assert a.end == b.start
    for w in windows[:-1]:
        assert w.ctx_end - w.end == STREAMING.right_context
    assert windows[-1].ctx_end == total
    for w in windows:  # the smallest vocoder call that holds the chunk and its whole left context (silence first)
        assert w.start - w.ctx_start >= STREAMING.left_context
        assert w.ctx_end - w.ctx_start == STREAMING.vocoder_bucket(w.ctx_end - w.start + STREAMING.left_context)


def test_chunks_start_small_and_grow() -> None:
    sizes = [w.end - w.start for w in plan([24] * 60)][:-1]
    assert sizes[: len(STREAMING.chunk_frames)] == list(STREAMING.chunk_frames)
    assert sizes == sorted(sizes)


def test_chunk_sizes_grow_along_the_stream_not_each_sentence() -> None:
    s = STREAMING  # a later sentence starts where the schedule stands after the audio before it
    sums = np.cumsum(s.chunk_frames)
    assert [s.chunk_index_after(f) for f in (0, sums[0] - 1, sums[0], sums[1], sums[2] - 1, sums[2], 10_000)] == [
        0, 0, 1, 2, 2, 3, len(s.chunk_frames) - 1]
    cfg = ModelConfig()
    pipeline = Pipeline(PacedBackend(cfg, stop_at=30, vocoder_s=lambda i: 0.0), cfg)
    chunks = stream_all(pipeline, [[1] * 40, [1] * 40])
    sizes = [[len(c.mel) for c in chunks if c.sentence == i] for i in (0, 1)]
    assert sizes[0][: len(s.chunk_frames) - 1] == list(s.chunk_frames[:-1])  # the stream's first audio leaves early
    assert sizes[1][0] == s.chunk_size(s.chunk_index_after(sum(sizes[0]))) == s.chunk_frames[-1]  # not 8 again


def test_first_stop() -> None:
    assert first_stop(np.array([-3.0, -1.0, 0.5, 2.0])) == 2
    assert first_stop(np.array([-1.0, 0.0])) is None


class ScriptedDecoder:
    """A backend whose decoder emits frame values = global step index and stops where told."""

    def __init__(self, cfg: ModelConfig, stop_at: int | None) -> None:
        self.cfg, self.stop_at, self.step = cfg, stop_at, 0

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        d = self.cfg.decoder
        if model == contract.TEXT_ENCODER:
            t = inputs["phonemes"].shape[1]
            return {"memory": np.zeros((1, t, sum(contract.memory_parts(self.cfg))), np.float32)}
        if model == contract.VOCODER:
            return {"audio": np.repeat(inputs["mel"][0, :, 0], audio.HOP_LENGTH)[None]}
        if model == contract.STYLE_ENCODER:
            return {contract.STYLE: np.zeros((1, self.cfg.style.dim), np.float32)}
        steps = np.arange(self.step, self.step + d.steps_per_call)
        self.step += d.steps_per_call
        gate = np.where(steps == self.stop_at, 1.0, -1.0)[None]
        mel = np.repeat(steps, d.frames_per_step)[None, :, None] * np.ones((1, 1, self.cfg.n_mels))
        states = {s.name + contract.STATE_OUT_SUFFIX: inputs[s.name] for s in contract.decoder_states(self.cfg)}
        return {"mel": mel.astype(np.float32), "gate": gate, **states}


@pytest.mark.parametrize(("stop_at", "tokens"), [(0, 10), (13, 10), (None, 3)])
def test_stop_rule_and_max_steps_guard(stop_at: int | None, tokens: int) -> None:
    cfg = ModelConfig()
    pipeline = Pipeline(ScriptedDecoder(cfg, stop_at), cfg)
    ids = [1] * tokens
    wav, mel = asyncio.run(pipeline.synthesize([ids], np.zeros(cfg.style.dim, np.float32)))
    expected_steps = stop_at + 1 if stop_at is not None else cfg.decoder.max_steps(tokens)
    stats = pipeline.stats[0]
    assert stats.steps == expected_steps and stats.hit_max_steps == (stop_at is None)
    assert mel.shape[0] == expected_steps * cfg.decoder.frames_per_step
    np.testing.assert_array_equal(mel[:, 0], np.repeat(np.arange(expected_steps), cfg.decoder.frames_per_step))
    assert wav.shape[0] == mel.shape[0] * audio.HOP_LENGTH
    np.testing.assert_array_equal(wav, np.repeat(mel[:, 0], audio.HOP_LENGTH))  # seams cut exactly


class ServesFirstDecode(ScriptedDecoder):
    """A :class:`ScriptedDecoder` that serves the ``first_decode`` ensemble in one call, as Triton does; logs calls."""

    ensembles = frozenset({contract.FIRST_DECODE})

    def __init__(self, cfg: ModelConfig, stop_at: int | None) -> None:
        super().__init__(cfg, stop_at)
        self.log: list[str] = []

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.log.append(model)
        if model != contract.FIRST_DECODE:
            return await super().infer(model, inputs)
        encoded = await super().infer(contract.TEXT_ENCODER, inputs)
        return {**encoded, **await super().infer(contract.DECODER, {**inputs, **encoded})}


def test_a_backend_serving_first_decode_gets_one_call_per_sentence_and_the_same_audio() -> None:
    cfg = ModelConfig()
    style = np.zeros(cfg.style.dim, np.float32)
    plain, ensembled = ScriptedDecoder(cfg, 13), ServesFirstDecode(cfg, 13)
    wavs = [asyncio.run(Pipeline(backend, cfg).synthesize([[1] * 10], style))[0] for backend in (plain, ensembled)]
    np.testing.assert_array_equal(wavs[0], wavs[1])
    assert ensembled.log[0] == contract.FIRST_DECODE and contract.TEXT_ENCODER not in ensembled.log
    assert ensembled.log.count(contract.DECODER) == 13 // cfg.decoder.steps_per_call  # the calls after the first


def test_cancellation_stops_between_decoder_calls() -> None:
    cfg = ModelConfig()
    pipeline = Pipeline(ScriptedDecoder(cfg, None), cfg)
    calls = iter(range(100))

    async def consume() -> None:
        async for _ in pipeline.stream([[1] * 50], np.zeros(cfg.style.dim, np.float32), lambda: next(calls) >= 3):
            pass

    with pytest.raises(Cancelled):
        asyncio.run(consume())
    assert pipeline.stats[0].decoder_calls == 3


class PacedBackend(ScriptedDecoder):
    """A :class:`ScriptedDecoder` whose calls take time: vocoder call ``i`` sleeps ``vocoder_s(i)`` (no call sleeps,
    or yields, when ``vocoder_s`` is None); every call is logged as ("start"|"end", model, index)."""

    def __init__(self, cfg: ModelConfig, stop_at: int | None, vocoder_s, fail_decoder_call: int | None = None) -> None:
        super().__init__(cfg, stop_at)
        self.vocoder_s, self.fail_decoder_call = vocoder_s, fail_decoder_call
        self.log: list[tuple[str, str, int]] = []
        self.counts: dict[str, int] = {}

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        index = self.counts[model] = self.counts.get(model, -1) + 1
        self.log.append(("start", model, index))
        if model == contract.DECODER and index == self.fail_decoder_call:
            raise RuntimeError("decoder failed")
        if self.vocoder_s is not None:
            await asyncio.sleep(self.vocoder_s(index) if model == contract.VOCODER else 0.001)
        self.log.append(("end", model, index))
        return await super().infer(model, inputs)


def stream_all(pipeline: Pipeline, sentences: list[list[int]]) -> list:
    async def run() -> list:
        return [c async for c in pipeline.stream(sentences, np.zeros(pipeline.cfg.style.dim, np.float32))]
    return asyncio.run(run())


def test_decoding_runs_ahead_of_vocoding_and_chunks_stay_in_order() -> None:
    cfg = ModelConfig()
    backend = PacedBackend(cfg, stop_at=30, vocoder_s=lambda i: 0.02 / (i + 1))  # later calls finish sooner
    pipeline = Pipeline(backend, cfg)
    chunks = stream_all(pipeline, [[1] * 40, [1] * 40])
    first_vocoder_end = backend.log.index(("end", contract.VOCODER, 0))
    assert backend.log.index(("start", contract.DECODER, 1)) < first_vocoder_end  # decoder went on meanwhile
    assert backend.log.index(("start", contract.TEXT_ENCODER, 1)) < backend.log.index(("end", contract.VOCODER, 2))
    ends = [i for kind, model, i in backend.log if kind == "end" and model == contract.VOCODER]
    assert ends != sorted(ends)  # they finished out of order ...
    frames = np.concatenate([c.mel[:, 0] for c in chunks])  # ... and came out in order, each frame once
    assert len(frames) == sum(s.frames for s in pipeline.stats) and np.all(np.diff(frames) >= 0)
    assert set(np.unique(frames, return_counts=True)[1]) == {cfg.decoder.frames_per_step}
    assert [c.sentence for c in chunks] == sorted(c.sentence for c in chunks)
    np.testing.assert_array_equal(np.concatenate([c.audio for c in chunks]), np.repeat(frames, audio.HOP_LENGTH))
    assert [c.last for c in chunks] == [False] * (len(chunks) - 1) + [True]  # the stream's end known with its chunk


def test_first_chunk_first_keeps_one_vocoder_call_in_flight_and_the_first_chunk_ahead() -> None:
    cfg = ModelConfig()
    streaming = dataclasses.replace(STREAMING, first_chunk_first=True)
    backend = PacedBackend(cfg, stop_at=30, vocoder_s=lambda i: 0.02 / (i + 1))
    chunks = stream_all(Pipeline(backend, cfg, streaming), [[1] * 40, [1] * 40])
    assert backend.log.index(("start", contract.DECODER, 1)) > backend.log.index(("end", contract.VOCODER, 0))
    in_flight = 0
    for kind, model, _ in backend.log:
        if model == contract.VOCODER:
            in_flight += 1 if kind == "start" else -1
            assert in_flight <= 1
    ends = [i for kind, model, i in backend.log if kind == "end" and model == contract.VOCODER]
    assert ends == sorted(ends)
    # the same audio as decoding and vocoding all at once
    default = stream_all(Pipeline(PacedBackend(cfg, stop_at=30, vocoder_s=lambda i: 0.0), cfg), [[1] * 40, [1] * 40])
    np.testing.assert_array_equal(np.concatenate([c.audio for c in chunks]), np.concatenate([c.audio for c in default]))


def test_a_backend_that_never_yields_still_vocodes_between_decoder_calls() -> None:
    """An in-process backend computes inside ``infer``: the first chunk must not wait for the whole sentence."""
    cfg = ModelConfig()
    backend = PacedBackend(cfg, stop_at=40, vocoder_s=None)
    stream_all(Pipeline(backend, cfg), [[1] * 40])
    starts = [(model, i) for kind, model, i in backend.log if kind == "start"]
    assert starts.index((contract.VOCODER, 0)) < starts.index((contract.DECODER, 1))


def test_a_failure_comes_after_the_chunks_started_before_it() -> None:
    cfg = ModelConfig()
    backend = PacedBackend(cfg, stop_at=None, vocoder_s=lambda i: 0.01, fail_decoder_call=2)
    pipeline = Pipeline(backend, cfg)
    got = []

    async def consume() -> None:
        async for chunk in pipeline.stream([[1] * 50], np.zeros(cfg.style.dim, np.float32)):
            got.append(chunk)

    with pytest.raises(RuntimeError, match="decoder failed"):
        asyncio.run(consume())
    assert len(got) == pipeline.stats[0].vocoder_calls > 0
    assert not any(c.last for c in got)  # a failure follows: no chunk may end the stream
    assert sum(len(c.mel) for c in got) <= 2 * cfg.decoder.frames_per_call


def test_closing_the_stream_early_cancels_the_calls_in_flight() -> None:
    cfg = ModelConfig()
    backend = PacedBackend(cfg, stop_at=None, vocoder_s=lambda i: 0.02)
    pipeline = Pipeline(backend, cfg)

    async def first_chunk_then_leave() -> int:
        async with contextlib.aclosing(pipeline.stream([[1] * 200], np.zeros(cfg.style.dim, np.float32))) as chunks:
            async for _ in chunks:
                break
        calls = sum(kind == "start" for kind, _, _ in backend.log)
        await asyncio.sleep(0.1)  # calls still running would end (or new ones start) now
        return calls

    calls_at_exit = asyncio.run(first_chunk_then_leave())
    started = {(m, i) for kind, m, i in backend.log if kind == "start"}
    ended = {(m, i) for kind, m, i in backend.log if kind == "end"}
    assert len(started) == calls_at_exit  # no call started after the consumer left ...
    assert started - ended  # ... and those in flight then never finished
    assert not pipeline.stats[0].hit_max_steps


def text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=np.object_)


@pytest.mark.parametrize(("inputs", "name"), [
    ({}, "TEXT"),
    ({"TEXT": text(" ")}, "TEXT"),
    ({"TEXT": np.array([b"\xff\xfe"], dtype=np.object_)}, "TEXT"),
    ({"TEXT": text("a" * 20_001)}, "TEXT"),
    ({"TEXT": text("Hi."), "REFERENCE_SAMPLE_RATE": np.array([16000], np.int32)}, "REFERENCE_SAMPLE_RATE"),
    ({"TEXT": text("Hi."), "REFERENCE_AUDIO": np.zeros(16000, np.float32)}, "REFERENCE_SAMPLE_RATE"),
    ({"TEXT": text("Hi."), "VOICE": text("f1"), "REFERENCE_AUDIO": np.zeros(16000, np.float32),
      "REFERENCE_SAMPLE_RATE": np.array([16000], np.int32)}, "REFERENCE_AUDIO"),
    ({"TEXT": text("Hi."), "REFERENCE_AUDIO": np.full(16000, 3.0, np.float32),
      "REFERENCE_SAMPLE_RATE": np.array([16000], np.int32)}, "REFERENCE_AUDIO"),
    ({"TEXT": text("Hi."), "REFERENCE_AUDIO": np.zeros(100, np.float32),
      "REFERENCE_SAMPLE_RATE": np.array([16000], np.int32)}, "REFERENCE_AUDIO"),
])
def test_parse_request_names_the_bad_input(inputs: dict, name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_request(inputs)
    assert caught.value.input_name == name and str(caught.value).startswith(name)


def test_voice_bank_names_an_unknown_preset() -> None:
    bank = from_styles({("f1", "neutral"): np.zeros(4), ("f1", "sad"): np.ones(4)}, "f1", "neutral")
    assert bank.style(None, "sad")[0] == 1.0
    for args, name in ((("zed", None), "VOICE"), (("f1", "bored"), "EMOTION")):
        with pytest.raises(InvalidInput, match=rf"^{name}: '\w+' is unknown; available") as caught:
            bank.style(*args)
        assert caught.value.input_name == name


def test_parse_request_accepts_a_reference() -> None:
    req = parse_request({"TEXT": text("Hello."), "REFERENCE_AUDIO": np.zeros(24000, np.float32),
                         "REFERENCE_SAMPLE_RATE": np.array([24000], np.int32)})
    assert req.text == "Hello." and req.reference_sample_rate == 24000 and req.voice is None


def test_service_warm_up_loads_the_front_end_before_any_request() -> None:
    code = ("from tts_triton.core.config import ModelConfig; from tts_triton.serving.service import TTSService; "
            "from tts_triton.text import g2p; from tts_triton.core.voices import from_styles; import numpy as np; "
            "s = TTSService(ModelConfig(), from_styles({('f1', 'neutral'): np.zeros(4)}, 'f1', 'neutral')); "
            "print(g2p._ESPEAK._lib is None); s.warm_up(); print(g2p._ESPEAK._lib is None)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["True", "False"], run.stderr  # not loaded by the constructor, loaded by warm_up


LONG_PLAIN = " ".join(["This sentence is one of a long text."] * 40)


def first_chunk_prepared(requests: list[SynthesisRequest], monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """The event loop's thread and the thread that prepared each request, asking a service for each one's first
    chunk in turn."""
    threads: list[str] = []

    def plan(text: str, max_tokens: int) -> list:
        threads.append(threading.current_thread().name)
        return real(text, max_tokens)

    real = service.plan_request
    monkeypatch.setattr(service, "plan_request", plan)
    cfg = ModelConfig()
    tts = TTSService(cfg, from_styles({("f1", "neutral"): np.zeros(cfg.style.dim)}, "f1", "neutral"))

    async def main() -> str:
        for request in requests:
            async with contextlib.aclosing(tts.stream(request, ScriptedDecoder(cfg, 0))) as chunks:
                await anext(chunks)
        return threading.current_thread().name

    return asyncio.run(main()), threads


def test_a_long_text_or_a_reference_is_prepared_off_the_event_loop_and_the_rest_on_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(LONG_PLAIN) >= service.PLAN_OFF_LOOP_CHARS > len("Hello there.")
    reference = SynthesisRequest("Hello there.", reference_audio=np.zeros(16000, np.float32),
                                 reference_sample_rate=16000)
    loop, threads = first_chunk_prepared([SynthesisRequest("Hello there."), SynthesisRequest(LONG_PLAIN), reference],
                                         monkeypatch)
    assert threads[0] == loop and threads[1] != loop and threads[2] != loop
    assert threads[1].startswith("tts-prepare") and threads[2].startswith("tts-prepare")


def test_a_long_text_prepared_off_the_loop_still_fails_as_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    french = " ".join(["Ceci est une phrase assez longue, écrite en français pour le test."] * 20)
    with pytest.raises(InvalidInput, match="French"):
        first_chunk_prepared([SynthesisRequest(french)], monkeypatch)


def test_a_reference_is_resampled_and_encoded_once_then_its_style_comes_from_the_cache() -> None:
    cfg = ModelConfig()
    tts = TTSService(cfg, from_styles({("f1", "neutral"): np.zeros(cfg.style.dim)}, "f1", "neutral"))
    ref = (0.1 * np.sin(np.arange(24000) / 7)).astype(np.float32)
    request = SynthesisRequest("Hello there.", reference_audio=ref, reference_sample_rate=24000)
    first = tts.prepare(request)
    assert first.style is None and first.ref_mel is not None and first.ref_mel.shape[1] == cfg.n_mels
    np.testing.assert_array_equal(first.ref_mel, audio.mel_spectrogram(audio.resample(ref, 24000)))
    tts.style_cache.put(first.key, np.ones(cfg.style.dim, np.float32))
    again = tts.prepare(request)
    assert again.ref_mel is None and again.key is None and again.style[0] == 1


def test_style_cache_is_lru_by_content() -> None:
    cache = StyleCache(capacity=2)
    keys = [StyleCache.key(np.full(10, i, np.float32), 16000) for i in range(3)]
    assert StyleCache.key(np.full(10, 0, np.float32), 22050) != keys[0]
    for i, key in enumerate(keys):
        cache.put(key, np.full(4, i, np.float32))
    assert cache.get(keys[0]) is None and cache.get(keys[2])[0] == 2


class StyleRecorder(ScriptedDecoder):
    """A :class:`ScriptedDecoder` that keeps the style each decoder call was given."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg, stop_at=2)
        self.styles: list[np.ndarray] = []

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if model == contract.DECODER:
            self.styles.append(inputs[contract.STYLE][0].copy())
        return await super().infer(model, inputs)


def test_a_pitch_shift_goes_to_the_decoders_style_within_the_axis_span_and_the_rest_to_the_mel() -> None:
    cfg = ModelConfig()
    dim = cfg.style.dim
    bank = from_styles({("f1", "neutral"): np.zeros(dim), ("m1", "neutral"): np.zeros(dim)}, "f1", "neutral")
    bank.pitch_axes["f1"], bank.pitch_span = [0.5] * dim, 4.0
    from tts_triton.serving.controls import Controls

    def run(semitones: float, voice: str) -> tuple[StyleRecorder, np.ndarray]:
        backend = StyleRecorder(cfg)
        _, mel = asyncio.run(Pipeline(backend, cfg).synthesize(
            [[1] * 10], np.zeros(dim, np.float32), Controls(pitch=semitones),
            lambda st, v: bank.pitch_style(st, v or voice)))
        return backend, mel

    plain, plain_mel = run(0.0, "f1")
    assert all(np.array_equal(s, np.zeros(dim)) for s in plain.styles)
    up, up_mel = run(3.0, "f1")  # all along the axis: the decoder renders it, the mel is the decoder's own
    assert all(np.allclose(s, 1.5) for s in up.styles) and np.array_equal(up_mel, plain_mel)
    far, far_mel = run(-6.0, "f1")  # 4 along the axis, 2 more by the warp
    assert all(np.allclose(s, -2.0) for s in far.styles) and not np.array_equal(far_mel, plain_mel)
    other, other_mel = run(3.0, "m1")  # a voice without an axis: the warp alone
    assert all(np.array_equal(s, np.zeros(dim)) for s in other.styles) and not np.array_equal(other_mel, plain_mel)
