"""The Triton-free synthesis core: encode, the K-step decode loop, and streamed chunked vocoding.

:class:`Pipeline` talks to the four networks only through an :class:`InferBackend` (``infer(model,
inputs) -> outputs`` with numpy tensors named as in :mod:`tts_triton.core.contract`). The BLS model plugs
in Triton calls, the reference synthesizer plugs in the PyTorch stages, the ONNX check plugs in
ONNX Runtime sessions: one loop, one stop rule, one chunking rule for all of them.

Stop rule: a decoder call returns K gate logits; decoding stops after the first step whose logit is
> 0 (that step's r frames are kept), or when the max-steps guard for the sentence is reached.

Speech controls (:mod:`tts_triton.serving.controls`) act between the decoder and the vocoder: each
sentence's mel is time-scaled and pitch-shifted as it grows, the chunk planner cuts the result, a shifted
window's audio is held to its mel's level, and the gain is applied to each vocoded chunk; pauses are silent
chunks. A pitch shift goes first to the decoder itself where the voice has a pitch axis (an offset of its style:
:meth:`tts_triton.core.voices.VoiceBank.pitch_style`), and only what lies beyond the axis's span to the mel.
Word times (:mod:`tts_triton.serving.words`) come from the decoder's ``alignment`` output when asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from tts_triton.core import audio, contract
from tts_triton.core.config import STREAMING, ModelConfig, StreamingConfig
from tts_triton.core.fundamental import DECODED_F0, FundamentalTrack
from tts_triton.core.voices import PitchStyle
from tts_triton.errors import Cancelled
from tts_triton.serving.controls import (
    AS_TRAINED,
    Controls,
    TimeScaler,
    apply_gain,
    keep_level,
    pause_frames,
    shift_pitch,
)
from tts_triton.serving.words import WordClock, WordTime
from tts_triton.text import Sentence

#: A shift of ``semitones`` for a sentence's voice (None: the request's) -> how it is rendered.
PitchStyler = Callable[[float, "str | None"], PitchStyle]


class InferBackend(Protocol):
    """Runs one network on a batch of one: numpy inputs by contract name -> outputs by contract name. A backend
    that also serves ensembles in one request (Triton) names them in an ``ensembles`` attribute
    (:func:`infer_ensemble`)."""

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def served_ensembles(backend: InferBackend) -> frozenset[str]:
    """The ensembles ``backend`` serves in one request (its ``ensembles``; none unless it says so)."""
    return frozenset(getattr(backend, "ensembles", ()))


async def infer_ensemble(backend: InferBackend, cfg: ModelConfig, name: str,
                         inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of ensemble ``name`` (:data:`~tts_triton.core.contract.ENSEMBLES`): one request where
    ``backend`` serves it, else its members called in turn, each fed from ``inputs`` and the members before it."""
    if name in served_ensembles(backend):
        return await backend.infer(name, inputs)
    specs = contract.network_specs(cfg)
    feed: dict[str, np.ndarray] = dict(inputs)
    outputs: dict[str, np.ndarray] = {}
    for member in contract.ENSEMBLES[name]:
        out = await backend.infer(member, {n: feed[n] for n in specs[member].input_names})
        feed.update(out)
        outputs.update(out)
    return outputs


@dataclass
class Chunk:
    """One streamed piece of audio, with its mel frames and the words it completes (when asked for). ``last``: the
    stream knew, when it gave this chunk, that none follows (a server sends it with the FINAL flag, one response
    less per request); the last chunk may also come unmarked, when the stream could not tell without waiting."""

    audio: np.ndarray  # float32 [samples]
    mel: np.ndarray  # float32 [frames, n_mels], what was vocoded: decoder output (before the postnet), controlled
    sentence: int
    words: list[WordTime] = field(default_factory=list)
    sample_rate: int = audio.SAMPLE_RATE  # of ``audio``
    last: bool = False


@dataclass
class SentenceStats:
    steps: int = 0
    frames: int = 0
    decoder_calls: int = 0
    vocoder_calls: int = 0
    hit_max_steps: bool = False


@dataclass
class ChunkWindow:
    """Frames ``[start, end)`` are emitted by vocoding ``[ctx_start, ctx_end)`` and trimming the context.

    ``ctx_end - ctx_start`` is one of ``StreamingConfig.vocoder_frames``; frames before 0 (``ctx_start < 0``)
    are silence.
    """

    ctx_start: int
    start: int
    end: int
    ctx_end: int

    def trim(self, samples: np.ndarray, hop: int = audio.HOP_LENGTH) -> np.ndarray:
        lo = (self.start - self.ctx_start) * hop
        return samples[lo : lo + (self.end - self.start) * hop]


class ChunkPlanner:
    """Decides when the growing mel of one sentence is ready for the next vocoder call.

    Chunk ``i`` holds ``streaming.chunk_size(i)`` frames and waits for ``right_context`` frames of
    lookahead; once the sentence is finished, everything left goes out in one final chunk. Every window
    spans the smallest of ``streaming.vocoder_frames`` that holds the chunk and both its contexts, the left
    one reaching into silence before the sentence's first frame where the chunk starts earlier, and further
    left to fill the window. So every chunk sees what one-shot vocoding of the sentence in silence sees
    within its contexts, streams at different points share a vocoder batch, and the few shapes mean few
    graph replays per batch.
    """

    def __init__(self, streaming: StreamingConfig = STREAMING, index: int = 0) -> None:
        """``index``: where this sentence's chunks start on ``streaming.chunk_frames`` (a later sentence's go on
        from where the stream's audio has brought the schedule: :meth:`StreamingConfig.chunk_index_after`)."""
        self.streaming = streaming
        self.emitted = 0
        self.index = index

    def next_window(self, available: int, finished: bool) -> ChunkWindow | None:
        s = self.streaming
        start = self.emitted
        if finished:
            if available <= start:
                return None
            end, ctx_end = available, available
        else:
            end = start + s.chunk_size(self.index)
            ctx_end = end + s.right_context
            if available < ctx_end:
                return None
        self.emitted = end
        self.index += 1
        length = s.vocoder_bucket(ctx_end - start + s.left_context)
        return ChunkWindow(ctx_end - length, start, end, ctx_end)


def first_stop(gate: np.ndarray) -> int | None:
    """Index of the first step whose stop logit is > 0, or None."""
    hits = np.flatnonzero(gate > 0.0)
    return int(hits[0]) if hits.size else None


def pad_tokens(ids: list[int], length: int) -> tuple[np.ndarray, np.ndarray]:
    """-> (phonemes ``[1, length]`` int32, mask ``[1, length]`` float32) with zero padding."""
    phonemes = np.zeros((1, length), dtype=np.int32)
    phonemes[0, : len(ids)] = ids
    mask = np.zeros((1, length), dtype=np.float32)
    mask[0, : len(ids)] = 1.0
    return phonemes, mask


class Pipeline:
    """Sentences of phoneme ids + a style -> streamed audio chunks. See the module docstring."""

    def __init__(self, backend: InferBackend, cfg: ModelConfig, streaming: StreamingConfig = STREAMING) -> None:
        self.backend = backend
        self.cfg = cfg
        self.streaming = streaming
        self.state_specs = contract.decoder_states(cfg)
        self.stats: list[SentenceStats] = []
        self.style: np.ndarray | None = None

    def initial_state(self, tokens: int) -> dict[str, np.ndarray]:
        dims = {contract.TOKENS: tokens}
        return {s.name: np.zeros((1, *(dims.get(d, d) for d in s.dims)), np.float32) for s in self.state_specs}

    async def decode(self, ids: list[int], stats: SentenceStats, cancelled: Callable[[], bool] = lambda: False,
                     ref_mel: np.ndarray | None = None, style: np.ndarray | None = None,
                     offset: np.ndarray | None = None
                     ) -> AsyncIterator[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]:
        """Yield the decoder's mel frames ``[n, n_mels]`` call by call until the stop rule fires, each with
        the alignment rows of those steps ``[steps, len(ids)]`` and the frames' fundamental ``[n]``
        (:data:`~tts_triton.core.fundamental.DECODED_F0`), each None when the backend does not return it.

        Uses ``style``, else ``self.style``, or the style of ``ref_mel`` (which then becomes ``self.style``),
        plus ``offset`` (a pitch shift along the voice's axis) when given.
        The text encoder and the first decoder call are one ``first_decode`` request; with ``ref_mel``, the text
        and the reference are one ``encode`` request before the first decoder call.
        """
        d = self.cfg.decoder
        phonemes, mask = pad_tokens(ids, self.streaming.bucket(len(ids)))
        text = {contract.PHONEMES: phonemes, contract.MASK: mask}
        state = self.initial_state(mask.shape[1])
        if cancelled():
            raise Cancelled
        encoded = None
        if ref_mel is not None:
            inputs = {**text, contract.REF_MEL: ref_mel[None].astype(np.float32)}
            encoded = await infer_ensemble(self.backend, self.cfg, contract.ENCODE, inputs)
            self.style = encoded[contract.STYLE][0]
        style = self.style if style is None else style
        if offset is not None:
            style = style + offset
        styled = {contract.STYLE: style[None].astype(np.float32)}
        out = None  # the decoder's outputs not yet taken
        if encoded is None:
            out = encoded = await infer_ensemble(self.backend, self.cfg, contract.FIRST_DECODE,
                                                 {**text, **styled, **state})
        context = {contract.MEMORY: encoded[contract.MEMORY], contract.MASK: mask, **styled}
        max_steps = d.max_steps(len(ids))
        while True:
            if out is None:
                if cancelled():
                    raise Cancelled
                out = await self.backend.infer(contract.DECODER, {**context, **state})
            stats.decoder_calls += 1
            state = {s.name: out[s.name + contract.STATE_OUT_SUFFIX] for s in self.state_specs}
            gate = out[contract.GATE][0]
            stop = first_stop(gate)
            steps = d.steps_per_call if stop is None else stop + 1
            if stats.steps + steps >= max_steps:
                steps = max_steps - stats.steps
                stats.hit_max_steps = stop is None or stop + 1 > steps
                stop = steps - 1
            stats.steps += steps
            frames = out[contract.NET_MEL][0, : steps * d.frames_per_step]
            stats.frames += frames.shape[0]
            alignment = out[contract.ALIGNMENT][0, :steps, : len(ids)] if contract.ALIGNMENT in out else None
            f0 = out[DECODED_F0][0, : len(frames)] if DECODED_F0 in out else None
            out = None
            yield frames, alignment, f0
            if stop is not None:
                return

    async def vocode(self, mel: np.ndarray, window: ChunkWindow, level: bool = False,
                     track: FundamentalTrack | None = None) -> np.ndarray:
        """The audio of ``window``'s frames of ``mel``; with ``level``, held to the mel's energy over the whole
        window (:func:`~tts_triton.serving.controls.keep_level`) before its context is trimmed. ``track`` is
        ``mel``'s fundamental, required where the vocoder takes it (``VocoderConfig.harmonic``)."""
        frames = mel[max(0, window.ctx_start) : window.ctx_end]
        if window.ctx_start < 0:
            silence = np.full((-window.ctx_start, mel.shape[1]), audio.SILENCE_LOG_MEL, np.float32)  # before frame 0
            frames = np.concatenate([silence, frames])
        inputs = {contract.NET_MEL: frames[None]}
        if self.cfg.vocoder.harmonic:
            if track is None:
                raise ValueError("this vocoder takes the mel's fundamental track; none was given")
            inputs[contract.FUNDAMENTAL] = track.window(window.ctx_start, window.ctx_end)[None]
        samples = (await self.backend.infer(contract.VOCODER, inputs))[contract.NET_AUDIO][0]
        return window.trim(keep_level(samples, frames) if level else samples)

    async def stream(self, sentences: Sequence[list[int] | Sentence], style: np.ndarray | None = None,
                     cancelled: Callable[[], bool] = lambda: False,
                     ref_mel: np.ndarray | None = None, controls: Controls = AS_TRAINED,
                     voices: Callable[[str], np.ndarray] | None = None,
                     words: bool = False, pitch: PitchStyler | None = None) -> AsyncIterator[Chunk]:
        """Synthesize sentences (phoneme ids, or :class:`~tts_triton.text.Sentence` plans) in order,
        yielding audio as soon as each chunk is ready.

        ``controls`` apply to every sentence, combined with a plan's own markup; a plan's pauses are
        silent chunks and its ``voice`` is styled by ``voices(name)``. With ``words``, each chunk carries
        the words it completes (the backend must return the decoder's ``alignment``). ``pitch`` says how a
        sentence's pitch shift is rendered (None: all by the mel warp).

        Decoding runs ahead of vocoding: a vocoder call starts as soon as its window is decoded, while
        the decoder goes on (and the next sentence is encoded), so one stream keeps its decoder and
        vocoder calls in flight together; chunks are yielded in order. With ``streaming.first_chunk_first``
        a vocoder call also waits for the stream's previous one, and decoding waits for the first chunk.
        A failure comes after the chunks whose vocoder calls started before it.

        The style is ``style`` or, when that is None, the style of the reference log-mel ``ref_mel``
        (computed with the first sentence's encoding and kept in ``self.style``). Per-sentence
        statistics are appended to ``self.stats``. Raises :class:`Cancelled` when ``cancelled()``
        turns true between decoder calls. Closing the iterator early cancels the calls in flight.
        """
        if (style is None) == (ref_mel is None):
            raise ValueError("give exactly one of style and ref_mel")
        self.style = style
        pending: asyncio.Queue[asyncio.Future[Chunk] | None] = asyncio.Queue()
        plans = [s if isinstance(s, Sentence) else Sentence(list(s), []) for s in sentences]
        producer = asyncio.ensure_future(self._decode_all(plans, cancelled, ref_mel, pending, controls, voices, words,
                                                          pitch))
        try:
            while (chunk := await pending.get()) is not None:
                done = await chunk
                # the producer ended well and left only its end mark: nothing follows this chunk (made for this stream)
                done.last = pending.qsize() == 1 and producer.done() and not producer.cancelled() and \
                    not producer.exception()
                yield done
            await producer  # its failure, if any, after the chunks it started
        finally:
            left = [producer]
            while not pending.empty():
                if (future := pending.get_nowait()) is not None:
                    left.append(future)
            for future in left:
                future.cancel()
            await asyncio.gather(*left, return_exceptions=True)

    async def _decode_all(self, sentences: list[Sentence], cancelled: Callable[[], bool],
                          ref_mel: np.ndarray | None, pending: asyncio.Queue, controls: Controls,
                          voices: Callable[[str], np.ndarray] | None, words: bool,
                          pitch: PitchStyler | None) -> None:
        """Decode the sentences in order, putting each chunk's vocoder call on ``pending`` as it starts;
        None last, also on failure."""
        first_chunk_first = self.streaming.first_chunk_first
        last: asyncio.Future[Chunk] | None = None  # the stream's latest vocoder call
        offset = 0  # output frames of the stream so far, pauses included
        try:
            for index, plan in enumerate(sentences):
                offset += self._pause(pending, plan.pause_before, index)
                ctl = controls.combine(plan.rate, plan.pitch, plan.volume)
                shift = pitch(ctl.pitch, plan.voice) if pitch is not None else PitchStyle(None, ctl.pitch)
                ctl = replace(ctl, pitch=shift.warp)  # what the decoder does not render, the mel warp does
                style = voices(plan.voice) if plan.voice is not None and voices is not None else None
                stats = SentenceStats()
                self.stats.append(stats)
                planner = ChunkPlanner(self.streaming, self.streaming.chunk_index_after(offset))
                scaler = TimeScaler(ctl.speed)
                clock = WordClock(plan.words, self.cfg.decoder.frames_per_step, ctl.speed, offset) if words else None
                source = mel = np.zeros((0, self.cfg.n_mels), np.float32)
                track = FundamentalTrack() if self.cfg.vocoder.harmonic else None
                decoded = self.decode(plan.ids, stats, cancelled, ref_mel if index == 0 else None, style,
                                      shift.offset)
                async for frames, alignment, f0 in decoded:
                    if clock is not None:
                        if alignment is None:
                            raise RuntimeError("word timestamps need the decoder's alignment; the backend gave none")
                        clock.push(alignment)
                    source = np.concatenate([source, frames])
                    mel = self._grow(mel, shift_pitch(scaler.extend(source, False), ctl.pitch), track,
                                     f0 if ctl.keeps_frames else None)
                    started = self._start_chunks(pending, planner, mel, index, stats, False, last, ctl, clock, offset,
                                                 track)
                    if started:
                        if first_chunk_first and index == 0 and len(started) == stats.vocoder_calls:
                            await asyncio.wait(started[:1])  # the stream's first chunk before decoding on
                        last = started[-1]
                    await asyncio.sleep(0)  # a backend computing inside infer (in process) vocodes before decoding on
                mel = self._grow(mel, shift_pitch(scaler.extend(source, True), ctl.pitch), track)
                if clock is not None:
                    clock.finish(len(mel))
                if started := self._start_chunks(pending, planner, mel, index, stats, True, last, ctl, clock, offset,
                                                 track):
                    last = started[-1]
                if clock is not None and (left := clock.take(float("inf"))):  # words ending on the last frame
                    self._put_done(pending, Chunk(np.zeros(0, np.float32), mel[:0], index, left))
                offset += len(mel) + self._pause(pending, plan.pause_after, index)
        finally:
            pending.put_nowait(None)

    @staticmethod
    def _grow(mel: np.ndarray, frames: np.ndarray, track: FundamentalTrack | None,
              f0: np.ndarray | None = None) -> np.ndarray:
        """``mel`` with ``frames`` appended, and ``track`` (where kept) extended by them, with their fundamental
        ``f0`` where the backend estimated it."""
        if track is not None:
            track.extend(frames, f0)
        return np.concatenate([mel, frames])

    def _put_done(self, pending: asyncio.Queue, chunk: Chunk) -> None:
        done: asyncio.Future[Chunk] = asyncio.get_running_loop().create_future()
        done.set_result(chunk)
        pending.put_nowait(done)

    def _pause(self, pending: asyncio.Queue, seconds: float, sentence: int) -> int:
        """Put ``seconds`` of silence on the stream as one chunk; its length in frames."""
        frames = pause_frames(seconds)
        if frames:
            mel = np.full((frames, self.cfg.n_mels), audio.SILENCE_LOG_MEL, np.float32)
            self._put_done(pending, Chunk(np.zeros(frames * audio.HOP_LENGTH, np.float32), mel, sentence))
        return frames

    def _start_chunks(self, pending: asyncio.Queue, planner: ChunkPlanner, mel: np.ndarray, sentence: int,
                      stats: SentenceStats, finished: bool, last: asyncio.Future[Chunk] | None,
                      controls: Controls = AS_TRAINED, clock: WordClock | None = None,
                      offset: int = 0, track: FundamentalTrack | None = None) -> list[asyncio.Future[Chunk]]:
        """Start the vocoder call of every window of ``mel`` that the planner has ready (with ``first_chunk_first``,
        each after the one before it, the first after ``last``), each with the words that end in it; those calls."""
        started: list[asyncio.Future[Chunk]] = []
        while (window := planner.next_window(len(mel), finished)) is not None:
            stats.vocoder_calls += 1
            after = (started[-1] if started else last) if self.streaming.first_chunk_first else None
            done = clock.take(offset + window.end) if clock is not None else []
            started.append(asyncio.ensure_future(self._chunk(mel, window, sentence, after, controls, done, track)))
            pending.put_nowait(started[-1])
        return started

    async def _chunk(self, mel: np.ndarray, window: ChunkWindow, sentence: int, after: asyncio.Future[Chunk] | None,
                     controls: Controls = AS_TRAINED, words: list[WordTime] | None = None,
                     track: FundamentalTrack | None = None) -> Chunk:
        if after is not None:  # first_chunk_first: one vocoder call of the stream in flight
            await asyncio.wait([after])
        samples = apply_gain(await self.vocode(mel, window, controls.shifts_pitch, track), controls.volume)
        return Chunk(samples, mel[window.start : window.end], sentence, words or [])

    async def synthesize(self, sentences: Sequence[list[int] | Sentence], style: np.ndarray,
                         controls: Controls = AS_TRAINED,
                         pitch: PitchStyler | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The whole utterance at once: (audio ``[samples]``, decoder mel ``[frames, n_mels]``)."""
        chunks = [c async for c in self.stream(sentences, style, controls=controls, pitch=pitch)]
        if not chunks:
            return np.zeros(0, np.float32), np.zeros((0, self.cfg.n_mels), np.float32)
        return np.concatenate([c.audio for c in chunks]), np.concatenate([c.mel for c in chunks])

