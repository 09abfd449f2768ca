"""One utterance of an input-streaming WebSocket session (:mod:`.stream_input`): its text cut into pieces, each piece
a streamed Triton request started as soon as it is cut (at most ``max_pieces_ahead`` at once), and their audio sent
in order through one encoder, so that the pieces join without gaps."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from starlette.websockets import WebSocketDisconnect

from tts_triton.client import AudioChunk, InvalidInputError, ServerBusyError, TTSError
from tts_triton.text.incremental import Piece, TextCutter

from .alignment import AlignedAudio, PieceAligner
from .encoders import Encoder, OutputFormat
from .stream_formats import new_stream_encoder
from .stream_messages import CLOSE_ERROR, CLOSE_TOO_BIG, SessionError

log = logging.getLogger("tts_triton.gateway.sessions")

#: Waits before resending a piece Triton refused as busy (4.75 s in all).
BUSY_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 1.6)


#: Characters of one message cut on the event loop; a longer message is cut on a worker thread, so that the
#: sockets and requests the loop serves are not held up by it.
OFF_LOOP_CHARS = 1024

class Session(Protocol):
    """What a context needs of its socket's session."""

    limits: Any  # SessionLimits: max_pieces_ahead, max_chunks_ahead, max_buffered_chars
    hub: Any  # SessionHub: its metrics
    state: Any  # the gateway's state: its client and metrics
    voice: str | None
    request_options: dict[str, Any]
    endpoint: str
    inbox: asyncio.Queue
    output_format: OutputFormat

    async def send(self, payload: dict[str, Any]) -> None: ...

    def context_done(self, context: Context) -> None: ...


@dataclass
class Job:
    """One piece: its synthesis task and what it produced (chunks, then None or the error), at most
    ``SessionLimits.max_chunks_ahead`` chunks unsent; ``holds_slot`` while it holds one of its context's
    ``max_pieces_ahead`` slots (from its synthesis' start until its audio is sent)."""

    piece: Piece
    cut_at: float
    events: asyncio.Queue
    task: asyncio.Task | None = None
    holds_slot: bool = False


@dataclass
class Stats:
    pieces: int = 0
    characters: int = 0
    audio_s: float = 0.0
    first_audio_s: float | None = None


class Context:
    """One utterance: its text cutter, its pieces in order and the task that sends their audio."""

    def __init__(self, session: Session, context_id: str | None, speed: float | None,
                 schedule: tuple[int, ...]) -> None:
        self.session, self.id, self.speed = session, context_id, speed
        self.cutter = TextCutter(schedule)
        self.jobs: asyncio.Queue[Job | None] = asyncio.Queue()
        self.ahead = asyncio.Semaphore(session.limits.max_pieces_ahead)
        self.ended = False
        self.encoder: Encoder | None = None
        self._held: AlignedAudio | None = None  # a message waiting for the encoder to give out its audio
        self._rate = 0
        self.sender = asyncio.ensure_future(self._send_all())
        self.stats = Stats()

    async def feed(self, text: str) -> None:
        """Cut ``text`` into pieces and start them (a long text is cut off the event loop)."""
        self.stats.characters += len(text)
        if len(text) < OFF_LOOP_CHARS:
            pieces = self.cutter.feed(text)
        else:
            pieces = await asyncio.to_thread(self.cutter.feed, text)
        if self.ended:  # cancelled while the text was cut
            return
        self._start(pieces)
        if self.cutter.buffered > self.session.limits.max_buffered_chars:
            raise SessionError(CLOSE_TOO_BIG, "buffer_full",
                               f"{self.cutter.buffered} characters are buffered without a place to cut them; "
                               f"the limit is {self.session.limits.max_buffered_chars}")

    def flush(self) -> None:
        self._start(self.cutter.flush())

    def end(self) -> None:
        """No more text: synthesize what is buffered, then finish."""
        if not self.ended:
            self.flush()
            self.ended = True
            self.jobs.put_nowait(None)

    def cancel(self) -> None:
        """Stop now: every request in flight is stopped, nothing more is sent."""
        self.ended = True
        self.sender.cancel()
        while not self.jobs.empty():
            job = self.jobs.get_nowait()
            if job is not None and job.task is not None:
                job.task.cancel()

    def _start(self, pieces: list[Piece]) -> None:
        for piece in pieces:
            self.session.hub.metrics.pieces.labels(piece.reason).inc()
            job = Job(piece, time.perf_counter(), asyncio.Queue(self.session.limits.max_chunks_ahead))
            job.task = asyncio.ensure_future(self._synthesize(job))
            self.jobs.put_nowait(job)

    async def _synthesize(self, job: Job) -> None:
        """Stream one piece from Triton into ``job.events``. A refusal for Triton's own stream limit (before any
        audio) is retried after each of :data:`BUSY_BACKOFF_S`: a busy moment delays a piece, it does not
        end the utterance. Backpressure: a full ``job.events`` (the client reads slower than audio comes) stops
        reading the Triton stream, and the next pieces wait for this one's slot, which the sender frees once
        the piece is sent; so a session that is not read holds at most ``max_pieces_ahead`` pieces and
        ``max_chunks_ahead`` chunks of each, and synthesizes nothing more until it is read again."""
        state = self.session.state
        await self.ahead.acquire()
        job.holds_slot = True
        state.metrics.in_flight.inc()
        produced = False
        try:
            for delay in (*BUSY_BACKOFF_S, None):
                chunks = state.client.stream(job.piece.text, voice=self.session.voice, speed=self.speed,
                                             return_words=True, **self.session.request_options)
                try:
                    async for chunk in chunks:
                        produced = True
                        await job.events.put(chunk)
                    await job.events.put(None)
                    return
                except ServerBusyError as e:
                    if delay is None or produced:
                        await job.events.put(e)
                        return
                except TTSError as e:
                    await job.events.put(e)
                    return
                finally:
                    await chunks.aclose()
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.free(job)
            raise
        except Exception as e:  # any failure ends the session with an error, never a hang
            await job.events.put(e)
        finally:
            state.metrics.in_flight.dec()

    def free(self, job: Job) -> None:
        """Give back the piece's slot (once): the next piece may start."""
        if job.holds_slot:
            job.holds_slot = False
            self.ahead.release()

    async def _send_all(self) -> None:
        """Send the pieces' audio in order, then the final message; errors go to the session's inbox."""
        current: Job | None = None
        try:
            while (current := await self.jobs.get()) is not None:
                await self._send_piece(current)
                self.free(current)
            if self.encoder is not None:
                held, self._held = self._held or AlignedAudio(np.zeros(0, np.float32)), None
                if (tail := self.encoder.finish()) or held.alignment:
                    await self._send_message(tail, held, self._rate, None)
            await self._send({"isFinal": True})
        except SessionError as e:
            self.session.inbox.put_nowait(e)
            return
        except (WebSocketDisconnect, OSError, RuntimeError):  # the socket is gone: the reader reports it
            return
        except Exception as e:  # a bug: the session ends with an internal error, never hangs
            log.exception("unexpected error sending a %s session's audio", self.session.endpoint)
            self.session.inbox.put_nowait(SessionError(CLOSE_ERROR, "internal_error",
                                                       f"internal error ({type(e).__name__})"))
            return
        finally:
            if current is not None and current.task is not None:
                current.task.cancel()
        self.session.context_done(self)

    async def _send_piece(self, job: Job) -> None:
        aligner = PieceAligner(job.piece.source, job.piece.text_offset)
        while (event := await job.events.get()) is not None:
            if isinstance(event, InvalidInputError):  # a piece the model cannot say: skipped, like silence
                log.warning("piece skipped: %s", event.message)
                return
            if isinstance(event, TTSError):
                raise SessionError(CLOSE_ERROR, "synthesis_failed", f"synthesis failed: {event.message}")
            if isinstance(event, Exception):
                log.error("a %s piece failed: %s: %s", self.session.endpoint, type(event).__name__, event)
                raise SessionError(CLOSE_ERROR, "internal_error", f"internal error ({type(event).__name__})")
            assert isinstance(event, AudioChunk)
            await self._send_audio(aligner.add(event.audio, event.sample_rate, event.words), event.sample_rate, job)
        if self._rate:
            await self._send_audio(aligner.finish(), self._rate, job)
        self.stats.pieces += 1

    async def _send_audio(self, message: AlignedAudio, rate: int, job: Job) -> None:
        """Encode and send; a message whose audio the encoder still holds (a resampler's delay, an MP3 frame
        not yet full), or that has none (a piece's last characters), waits and goes out with the next one."""
        if self.encoder is None:
            self.encoder, self._rate = new_stream_encoder(self.session.output_format, rate), rate
        if self._held is not None:
            message = self._held.then(message)
            self._held = None
        data = self.encoder.encode(message.audio)
        if not data:
            self._held = message
            return
        await self._send_message(data, message, rate, job)

    async def _send_message(self, data: bytes, message: AlignedAudio, rate: int, job: Job | None) -> None:
        if self.stats.first_audio_s is None and job is not None and data:
            self.stats.first_audio_s = time.perf_counter() - job.cut_at
            self.session.hub.metrics.first_audio.observe(self.stats.first_audio_s)
        seconds = message.audio.size / rate
        self.stats.audio_s += seconds
        self.session.hub.metrics.audio.inc(seconds)
        await self._send({"audio": base64.b64encode(data).decode(), "isFinal": None,
                          "alignment": message.alignment, "normalizedAlignment": message.normalized})

    async def _send(self, payload: dict[str, Any]) -> None:
        if self.id is not None:
            payload["contextId"] = self.id
        await self.session.send(payload)
