"""Triton Python (BLS) model behind ``tts`` (decoupled, streaming) and ``tts_offline`` (one response).

Contract (see docs/contract.md): inputs ``TEXT`` BYTES [1]; optional ``VOICE`` and
``EMOTION`` BYTES [1], or ``REFERENCE_AUDIO`` FP32 [-1] with ``REFERENCE_SAMPLE_RATE`` INT32 [1].
Outputs ``AUDIO`` FP32 [-1] and ``SAMPLE_RATE`` INT32 [1] per streamed chunk (``tts``) or once
(``tts_offline``), at the optional ``OUTPUT_SAMPLE_RATE`` INT32 [1] (resampled as it streams); ``MEL`` FP32
[-1, n_mels] (decoder frames) only when the client requests it. Optional
controls ``SPEED``, ``PITCH``, ``VOLUME`` FP32 [1]; ``WORDS`` BYTES [1] (JSON word timestamps of the chunk,
``tts_offline``: all of them) only when requested, and only then is the decoder's ``alignment`` asked for.
Bad input gets an INVALID_ARG error whose message names the input. Every request ends with the
FINAL flag, on errors and cancellation too (``tts_offline``: its one response carries it).

Concurrency: both models run one coroutine per request. ``tts`` has an async ``execute`` (Triton runs
it in the background); ``tts_offline`` is not decoupled, so Triton would wait for its ``execute``:
there it hands each request to an event loop of its own and answers through the response sender
(Triton >= 24.06), so that concurrent offline requests run side by side and share decoder batches.
Their network calls pass a :class:`~tts_triton.serving.gate.ProgressGate`: a short request is not
queued behind a long one. In both models a request with a long text or reference audio is prepared off the event
loop (:class:`~tts_triton.serving.service.TTSService`), so that it does not hold back the other requests' chunks.

A request stops early when the client stops it in-band (a second ``tts`` request whose ``tts_stop``
parameter names its request id: :class:`~tts_triton.model_instance.lifecycle.StopBoard`; the stream then ends
with a normal FINAL and the stop request gets a FINAL of its own), when the client cancels it
(``is_cancelled()``, asked every :data:`~tts_triton.model_instance.lifecycle.CANCEL_POLL_S` at most: a gRPC cancel,
deadline or closed connection) or at its time limit:
``RequestLimits.max_request_seconds``, shortened by the request's own ``timeout`` parameter. Triton 2.51
does not tell a model that an HTTP client disconnected; the time limit bounds that case. A stop at the
time limit is an UNAVAILABLE error.

Admission: at most ``max_streams`` requests in flight per model over all its instances
(:class:`~tts_triton.model_instance.lifecycle.Admission`); past it a request is refused at once with UNAVAILABLE
("server busy: ... limit of N ...") and FINAL.

Metrics: ``tts_active_requests`` (gauge, by ``model`` and ``instance``: a restarted stub resets its own
series to 0) and ``tts_requests_total`` (counter, by ``model`` and ``outcome``:
:data:`~tts_triton.model_instance.lifecycle.OUTCOMES`), beside Triton's own. Their updates are batched
(:class:`~tts_triton.model_instance.metrics.MetricBatch`): each reaches the server within half a second, and at
once when the instance's last request ends.

Utterance cache: when the server's environment sets ``TTS_CACHE_REDIS_URL`` (:mod:`tts_triton.cache`),
both models answer repeats from Redis and count ``tts_cache_*`` metrics (batched alike); the request parameter ``cache``
= false opts one request out, ``cache_tenant`` keeps its entries apart from other scopes' (the gateway's API keys).

Config parameters: ``model_config`` (ModelConfig JSON), ``voice_bank`` (VoiceBank JSON), ``first_chunk_first``
(``"true"``: :attr:`~tts_triton.core.config.StreamingConfig.first_chunk_first` for ``tts``; ``tts_offline`` ignores it),
``max_streams`` (the admission bound; absent or 0: none).

This module is a thin adapter: request handling lives in :mod:`tts_triton.serving.service`, the
decode loop in :mod:`tts_triton.serving.pipeline`; here are only the Triton calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

from tts_triton.cache.deployment import cache_scope, cache_wanted, open_cache
from tts_triton.core import audio, contract
from tts_triton.core.config import STREAMING, ModelConfig
from tts_triton.core.layout import (
    BLS_CALL_THREADS,
    FIRST_CHUNK_FIRST,
    MAX_STREAMS,
    MODEL_CONFIG,
    NETWORK_MAX_BATCH,
    VOICE_BANK,
)
from tts_triton.core.voices import VoiceBank
from tts_triton.errors import Cancelled, Stopped, TimedOut
from tts_triton.model_instance.lifecycle import (
    OUTCOMES,
    Admission,
    CancelPoll,
    Deadline,
    StopBoard,
    outcome_of,
    stop_target,
)
from tts_triton.model_instance.metrics import MetricBatch
from tts_triton.model_instance.params import int_parameter, parameters
from tts_triton.processes.memory import lift_file_size_limit
from tts_triton.serving.coalesce import Coalescer
from tts_triton.serving.fundamentals import FundamentalBackend
from tts_triton.serving.gate import ProgressGate
from tts_triton.serving.pipeline import Chunk
from tts_triton.serving.resample import resampled
from tts_triton.serving.service import TTSService, output_rate, parse_request
from tts_triton.serving.words import WordTime, words_json
from tts_triton.triton.utils import CallThreads, error_response, read_inputs


class BlsBackend:
    """:class:`~tts_triton.serving.pipeline.InferBackend` over BLS calls to the models of ``specs`` (CPU tensors),
    the ensembles among them in one request each; requests every output but the
    :data:`~tts_triton.core.contract.DIAGNOSTIC_OUTPUTS` not in ``diagnostic``."""

    def __init__(self, specs: dict[str, contract.ModelSpec], diagnostic: frozenset[str] = frozenset()) -> None:
        skip = contract.DIAGNOSTIC_OUTPUTS - diagnostic
        self.outputs = {name: [o for o in spec.output_names if o not in skip] for name, spec in specs.items()}
        self.ensembles = frozenset(contract.ENSEMBLES) & specs.keys()

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        request = pb_utils.InferenceRequest(
            model_name=model,
            inputs=[pb_utils.Tensor(name, np.ascontiguousarray(value)) for name, value in inputs.items()],
            requested_output_names=self.outputs[model],
        )
        response = await request.async_exec()
        if response.has_error():
            raise RuntimeError(f"model {model!r} failed: {response.error().message()}")
        return {name: pb_utils.get_output_tensor_by_name(response, name).as_numpy() for name in self.outputs[model]}


class GatedBackend:
    """One request's view of the BLS's (coalesced) backend whose calls wait for their turn at a
    :class:`ProgressGate`."""

    def __init__(self, backend: Coalescer, gate: ProgressGate) -> None:
        self.backend = backend
        self.gate = gate
        self.ensembles = backend.ensembles

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        await self.gate.call(self)
        return await self.backend.infer(model, inputs)


#: Threads that wait on BLS calls for the offline loop (one per request in flight, at most), unless configured.
OFFLINE_BLS_THREADS = 64
#: How many network calls a ``tts_offline`` request may run ahead of the least advanced one (ProgressGate).
OFFLINE_CALL_SLACK = 8
#: Seconds a ``tts_offline`` call waits at most for the requests behind it (ProgressGate).
OFFLINE_MAX_GATE_WAIT_S = 0.5


class TritonPythonModel:
    """See the module docstring."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        lift_file_size_limit()  # the server's cap is for the inputs it copies in, not this model's outputs
        params = parameters(config)
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.cfg = ModelConfig.from_dict(json.loads(params[MODEL_CONFIG]))
        self.spec = contract.tts_spec(self.cfg, config["name"])
        first = self.decoupled and params.get(FIRST_CHUNK_FIRST) == "true"  # tts_offline sends no first chunk
        streaming = dataclasses.replace(STREAMING, first_chunk_first=first)
        self.logger = pb_utils.Logger
        self.metrics = MetricBatch()
        cache = open_cache(os.environ, args.get("model_repository"), config["name"], self.cfg.to_dict(),
                           streaming, sample_rate=audio.SAMPLE_RATE, family=counter_family,
                           log=self.logger.log_warn, add=self.count)
        self.cache, self.cache_meter = cache if cache else (None, None)
        self.service = TTSService(self.cfg, VoiceBank.from_json(params[VOICE_BANK]), streaming)
        self.service.warm_up()
        specs = {**contract.network_specs(self.cfg), **contract.ensemble_specs(self.cfg)}
        self.name = config["name"]
        self.stops = StopBoard()
        self.admission = Admission(int_parameter(config, MAX_STREAMS, 0), self.name, self.stops.directory)
        max_rows = {name: int(rows) for name, rows in json.loads(params[NETWORK_MAX_BATCH]).items()}

        def streams() -> int:
            return self.admission.active

        def networks(diagnostic: frozenset[str] = frozenset()) -> FundamentalBackend | BlsBackend:
            """The BLS calls, each merged request's frames given their fundamental where the vocoder takes it."""
            calls = BlsBackend(specs, diagnostic)
            return FundamentalBackend(calls) if self.cfg.vocoder.harmonic else calls

        self.backend = Coalescer(networks(), specs, max_rows, streams)
        self.timing_backend = Coalescer(networks(frozenset({contract.ALIGNMENT})), specs, max_rows, streams)  # WORDS
        labels = {"model": self.name}
        # Open requests: a scaling signal that rises with load even though the async BLS queues nothing.
        self.active_family = pb_utils.MetricFamily(
            name=contract.ACTIVE_METRIC, description="Synthesis requests in progress", kind=pb_utils.MetricFamily.GAUGE)
        # Triton keeps a metric whose stub died: this instance's series starts from 0 again when it restarts.
        self.active = self.active_family.Metric(labels={**labels, "instance": args.get("model_instance_name", "")})
        self.active.set(0)
        self.outcome_family = pb_utils.MetricFamily(
            name=contract.REQUESTS_METRIC, description="Synthesis requests by how they ended",
            kind=pb_utils.MetricFamily.COUNTER)
        self.outcomes = {o: self.outcome_family.Metric(labels={**labels, "outcome": o}) for o in OUTCOMES}
        # the network calls' threads (async_exec runs each on the loop's default executor); tts: the stub's own
        # unless configured; tts_offline: its own loop's, always a pool of its own
        threads = int_parameter(config, BLS_CALL_THREADS, 0)
        self.calls = CallThreads(threads or OFFLINE_BLS_THREADS) if threads or not self.decoupled else None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.gate: ProgressGate | None = None
        if self.calls is not None and not self.decoupled:
            self.gate = ProgressGate(OFFLINE_CALL_SLACK, OFFLINE_MAX_GATE_WAIT_S)
            self.loop = asyncio.new_event_loop()
            self.calls.install(self.loop)
            self.loop_thread = threading.Thread(target=self.loop.run_forever, name="tts-offline", daemon=True)
            self.loop_thread.start()

    def count(self, metric: Any, value: float) -> None:
        """Add ``value`` to ``metric`` in the instance's batch; with no request in flight, send every pending sum at
        once (holding up no stream), so that an idle instance's metrics are exact: a request's end, or a cache write
        that ends after its stream."""
        self.metrics.add(metric, value)
        if not self.admission.active:
            self.metrics.flush()

    def finalize(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.loop_thread.join(timeout=5)
        if self.calls is not None:
            self.calls.close()
        self.metrics.close()
        del self.active, self.outcomes  # a Metric must go before its MetricFamily
        del self.active_family, self.outcome_family
        if self.cache_meter is not None:
            self.cache_meter.close()
        self.admission.close()

    def execute(self, requests: list[Any]) -> Coroutine[Any, Any, None] | None:
        """``tts``: a coroutine, which Triton runs in the background. ``tts_offline``: None at once; each
        request is answered from the model's own loop."""
        if self.decoupled:
            return self.stream_all(requests)
        for request in requests:
            asyncio.run_coroutine_threadsafe(self.offline(request), self.loop)
        return None

    async def stream_all(self, requests: list[Any]) -> None:
        if self.calls is not None:
            self.calls.install()  # the stub's loop
        await asyncio.gather(*(self.stream(r) for r in requests))

    def chunk_response(self, chunk_audio: np.ndarray, mel: np.ndarray | None,
                       words: list[WordTime] | None = None, rate: int = audio.SAMPLE_RATE) -> Any:
        # no copy of float32 arrays (an offline response's audio may be ~100 MB)
        tensors = [pb_utils.Tensor(contract.AUDIO, np.ascontiguousarray(chunk_audio, dtype=np.float32)),
                   pb_utils.Tensor(contract.SAMPLE_RATE, np.array([rate], dtype=np.int32))]
        if mel is not None:
            tensors.append(pb_utils.Tensor(contract.MEL, np.ascontiguousarray(mel, dtype=np.float32)))
        if words is not None:
            tensors.append(pb_utils.Tensor(contract.WORDS, np.array([words_json(words)], dtype=np.object_)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    async def chunks(self, request: Any) -> AsyncIterator[Chunk]:
        """The request's audio chunks, counting its outcome. Raises Refused (admission), InvalidInput,
        Stopped (in-band), Cancelled (by the client), TimedOut or the failure."""
        outcome = "failed"
        try:
            self.admission.enter()
        except Exception as err:
            self.metrics.add(self.outcomes[outcome_of(err)], 1)
            raise
        self.metrics.add(self.active, 1)
        deadline = Deadline(request.timeout())
        client_cancelled = CancelPoll(request.is_cancelled)
        request_id = request.request_id()
        want_words = contract.WORDS in request.requested_output_names()
        backend: Coalescer | GatedBackend = self.timing_backend if want_words else self.backend
        if self.gate is not None:
            backend = GatedBackend(backend, self.gate)
            self.gate.enter(backend)
        try:
            inputs = read_inputs(request, self.spec.input_names, model=self.name)
            parsed, rate = parse_request(inputs, words=want_words), output_rate(inputs)

            def stopped() -> bool:
                return self.stops.posted(request_id)

            def cancelled() -> bool:
                return deadline.passed() or client_cancelled() or stopped()

            def synthesize() -> AsyncIterator[Chunk]:
                return self.service.stream(parsed, backend, cancelled)

            # the utterance cache wraps the synthesis from outside: a hit never reaches the service; the audio is
            # resampled after it (entries keep the model's rate)
            chunks = resampled(self.cache.stream(parsed, synthesize, use=cache_wanted(request.parameters()),
                                                 stopped=cancelled, scope=cache_scope(request.parameters()))
                               if self.cache is not None else synthesize(), rate)
            try:
                async with contextlib.aclosing(chunks):
                    async for chunk in chunks:
                        yield chunk
            except Cancelled:
                if client_cancelled.cancelled:
                    raise
                if stopped():
                    raise Stopped from None
                raise TimedOut(f"synthesis stopped at its time limit of {deadline.seconds:g} s") from None
            outcome = "completed"
        except Exception as err:
            outcome = outcome_of(err)
            raise
        finally:
            if isinstance(backend, GatedBackend):
                await backend.gate.leave(backend)
            self.stops.clear(request_id)
            self.admission.leave()
            self.metrics.add(self.active, -1)
            self.count(self.outcomes[outcome], 1)

    async def stream(self, request: Any) -> None:
        sender = request.get_response_sender()

        async def send(response: Any = None, flags: int = 0) -> None:
            """Hand a response to Triton from the loop's executor: each send waits on a round trip to the server
            process, which would hold up every stream of this loop (14 % of its time at 4 streams on the CPU,
            docs/records/bench/host-python.md); awaited, so a stream's responses keep their order. A lone stream
            sends in place: no other stream waits, and the hop would delay its first chunk."""
            if self.admission.active <= 1:
                sender.send(response, flags=flags)
                return
            await asyncio.get_running_loop().run_in_executor(None, functools.partial(sender.send, response,
                                                                                      flags=flags))

        # The chunk the stream marks last goes with the FINAL flag, one response less per request; it is held until
        # the request has ended here (admission left, metrics counted), which takes no backend call, so that a
        # client may send its next request the moment it has the FINAL.
        last = None
        try:
            if (target := stop_target(request.parameters())) is not None:
                self.stops.post(target)  # the stop's own stream ends here, with its FINAL
                return
            want_mel = contract.MEL in request.requested_output_names()
            want_words = contract.WORDS in request.requested_output_names()
            async with contextlib.aclosing(self.chunks(request)) as chunks:
                async for chunk in chunks:
                    response = self.chunk_response(chunk.audio, chunk.mel if want_mel else None,
                                                   chunk.words if want_words else None, chunk.sample_rate)
                    if chunk.last:
                        last = response
                    else:
                        await send(response)
        except Stopped:
            pass  # the client asked for it: a normal end
        except Cancelled:
            self.logger.log_info("tts: request cancelled by the client; stream closed")
        except Exception as err:  # every failure still ends the stream below
            if last is not None:  # the audio before the failure first
                await send(last)
                last = None
            await send(error_response(err, "synthesis failed"))
        finally:
            await send(last, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    async def offline(self, request: Any) -> None:
        """Answer one ``tts_offline`` request through its response sender: one response, flagged FINAL. Its chunks
        are joined and sent from the loop's executor: a text at the length limit makes ~100 MB of audio, whose
        copies would hold up every other request of this loop (docs/records/bench/heavy-request-cpu.md)."""
        sender = request.get_response_sender()
        loop = asyncio.get_running_loop()
        try:
            wanted = set(request.requested_output_names())
            chunks = [c async for c in self.chunks(request)]
            response = await loop.run_in_executor(None, self.offline_response, chunks, wanted)
        except Exception as err:
            response = error_response(err, "synthesis failed")
        try:
            await loop.run_in_executor(None, functools.partial(
                sender.send, response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL))
        except Exception as err:  # nothing left to tell the client
            self.logger.log_error(f"tts_offline: could not send the response: {err}")

    def offline_response(self, chunks: list[Chunk], wanted: set[str]) -> Any:
        """The one response of a ``tts_offline`` request: its chunks joined, MEL and WORDS if ``wanted``."""
        whole = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        mel = None
        if contract.MEL in wanted:
            mel = np.concatenate([c.mel for c in chunks]) if chunks else np.zeros((0, self.cfg.n_mels), np.float32)
        words = [w for c in chunks for w in c.words] if contract.WORDS in wanted else None
        return self.chunk_response(whole, mel, words, chunks[0].sample_rate if chunks else audio.SAMPLE_RATE)


def counter_family(name: str, description: str) -> Any:
    """A Prometheus counter family on Triton's metrics port."""
    return pb_utils.MetricFamily(name=name, description=description, kind=pb_utils.MetricFamily.COUNTER)
