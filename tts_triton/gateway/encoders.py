"""Streaming audio encoders for the OpenAI ``response_format`` values.

Each encoder takes mono float32 chunks at the model's rate and returns the encoded bytes that are ready
to send, chunk by chunk, then the tail on :meth:`Encoder.finish`. libsndfile (``soundfile``) encodes wav,
flac, mp3, ogg/opus and raw pcm; PyAV (FFmpeg) encodes AAC in ADTS frames. Resampling, where a format
or OpenAI's contract needs another rate, is soxr's streaming resampler (state carried across chunks).

Every format but flac streams: mp3, ogg/opus, ADTS AAC and raw pcm are written front to back; for wav,
libsndfile goes back at the end to fill in the header's sizes, bytes already sent by then, so the stream
keeps the sizes of 0 it started with, which libsndfile, FFmpeg and browsers read to the end of the data.
flac is sent whole, at the end: its STREAMINFO header gets its sample count and MD5 only once the audio
is complete, and libsndfile (soundfile) cannot read a FLAC stream whose header lacks them to its end.
"""

from __future__ import annotations

import importlib.util
import io
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import soundfile as sf
import soxr
from soundfile import _ffi, _snd  # soundfile's cffi handles, for the one libsndfile command it does not wrap

__all__ = ["FORMATS", "Encoder", "OutputFormat", "available_formats", "new_encoder"]


@dataclass(frozen=True)
class OutputFormat:
    """One ``response_format``: its media type, libsndfile format/subtype (None: PyAV's AAC), the rate it
    is sent at (None: the model's own), whether its bytes leave as they are encoded and, for MP3, the
    constant bit rate (None: libsndfile's middle setting, about 80 kbit/s at 22 kHz)."""

    name: str
    media_type: str
    sf_format: str | None
    sf_subtype: str | None
    rate: int | None = None
    streams: bool = True
    bitrate_kbps: int | None = None


#: OpenAI's ``pcm``: 24 kHz, 16-bit little-endian, mono, no header.
PCM_RATE = 24_000
#: libopus encodes 8, 12, 16, 24 or 48 kHz only; 24 kHz is OpenAI's output rate.
OPUS_RATE = 24_000
#: libsndfile's SFC_SET_OGG_PAGE_LATENCY_MS (sndfile.h): without it an Ogg page holds about a second.
_SFC_SET_OGG_PAGE_LATENCY_MS = 0x1302
#: Ogg page latency: a page (the unit a player can start from) per 50 ms of audio, a few Opus frames.
OGG_PAGE_LATENCY_MS = 50.0

FORMATS: dict[str, OutputFormat] = {f.name: f for f in (
    OutputFormat("mp3", "audio/mpeg", "MP3", "MPEG_LAYER_III"),
    OutputFormat("opus", "audio/ogg", "OGG", "OPUS", OPUS_RATE),
    OutputFormat("aac", "audio/aac", None, None),
    OutputFormat("flac", "audio/flac", "FLAC", "PCM_16", streams=False),
    OutputFormat("wav", "audio/wav", "WAV", "PCM_16"),
    OutputFormat("pcm", "audio/pcm", "RAW", "PCM_16", PCM_RATE),
)}


class Encoder(Protocol):
    """Chunks in, encoded bytes out; ``finish`` once, after the last chunk."""

    def encode(self, audio: np.ndarray) -> bytes: ...

    def finish(self) -> bytes: ...


class _Sink(io.RawIOBase):
    """A write-once byte stream: bytes appended at the end are handed out by :meth:`take`; a write
    that goes back over bytes already taken (a header's length filled in at close) keeps only its part
    past them. Seekable, because libsndfile's writers need to be able to seek."""

    def __init__(self) -> None:
        self._taken = 0  # bytes handed out so far
        self._pending = bytearray()  # bytes after them
        self._position = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return b""  # writers here never read back what they wrote

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._taken + len(self._pending)}[whence]
        self._position = base + offset
        return self._position

    def write(self, data: bytes | bytearray | memoryview) -> int:
        data = bytes(data)
        start, end = self._position, self._position + len(data)
        keep_from = max(start, self._taken)
        if keep_from < end:
            offset = keep_from - self._taken
            self._pending[offset:offset + end - keep_from] = data[keep_from - start:]
        self._position = end
        return len(data)

    def take(self) -> bytes:
        out = bytes(self._pending)
        self._taken += len(out)
        self._pending.clear()
        return out


class _Resampler:
    """soxr's streaming resampler from ``rate_in`` to ``rate_out``; the identity when they match."""

    def __init__(self, rate_in: int, rate_out: int) -> None:
        self._stream = None if rate_in == rate_out else soxr.ResampleStream(rate_in, rate_out, 1, dtype="float32")

    def __call__(self, audio: np.ndarray, *, last: bool = False) -> np.ndarray:
        if self._stream is None:
            return audio
        return self._stream.resample_chunk(audio, last=last)


class SoundfileEncoder:
    """libsndfile writing ``fmt`` into a :class:`_Sink`."""

    def __init__(self, fmt: OutputFormat, rate: int) -> None:
        out_rate = fmt.rate or rate
        self._resample = _Resampler(rate, out_rate)
        self._sink = _Sink()
        self._streams = fmt.streams
        endian = "LITTLE" if fmt.sf_format == "RAW" else "FILE"
        # Constant bit rate MP3 (about 80 kbit/s at 22 kHz): with VBR, LAME's Xing header (filled in at close,
        # too late) keeps a wrong frame count that readers trust for the duration. libsndfile applies the
        # bit-rate mode only together with a compression level.
        mp3 = {"bitrate_mode": "CONSTANT", "compression_level": _mp3_level(fmt.bitrate_kbps, out_rate)} \
            if fmt.sf_format == "MP3" else {}
        self._file = sf.SoundFile(self._sink, "w", samplerate=out_rate, channels=1, format=fmt.sf_format,
                                  subtype=fmt.sf_subtype, endian=endian, **mp3)
        if fmt.sf_format == "OGG":
            latency = _ffi.new("double*", OGG_PAGE_LATENCY_MS)
            _snd.sf_command(self._file._file, _SFC_SET_OGG_PAGE_LATENCY_MS, latency, _ffi.sizeof("double"))

    def encode(self, audio: np.ndarray) -> bytes:
        samples = self._resample(np.asarray(audio, dtype=np.float32))
        if samples.size:
            self._file.write(np.clip(samples, -1.0, 1.0))
        return self._sink.take() if self._streams else b""

    def finish(self) -> bytes:
        tail = self._resample(np.zeros(0, np.float32), last=True)
        if tail.size:
            self._file.write(np.clip(tail, -1.0, 1.0))
        self._file.close()
        return self._sink.take()


def _mp3_level(kbps: int | None, rate: int) -> float:
    """libsndfile's compression level for a constant ``kbps``: it maps 0..1 linearly onto LAME's bit-rate range,
    32-320 kbit/s for MPEG-1 rates (32 kHz and up), 8-160 below (measured: 0.842 at 22.05 kHz gives 32)."""
    if kbps is None:
        return 0.5
    low, high = (32, 320) if rate >= 32_000 else (8, 160)
    return min(max((high - kbps) / (high - low), 0.0), 0.99)  # 1.0 itself is refused by libsndfile


class AacEncoder:
    """FFmpeg's AAC encoder (PyAV) in an ADTS stream: self-delimiting frames, playable as they arrive."""

    def __init__(self, rate: int) -> None:
        import av  # FFmpeg, for this format only (an environment without PyAV serves the others)

        self._av = av
        self._rate = rate
        self._sink = _Sink()
        self._container = av.open(self._sink, mode="w", format="adts")
        self._stream = self._container.add_stream("aac", rate=rate, layout="mono")

    def encode(self, audio: np.ndarray) -> bytes:
        samples = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
        if samples.size:
            frame = self._av.AudioFrame.from_ndarray(samples[None, :], format="flt", layout="mono")
            frame.sample_rate = self._rate
            self._mux(frame)
        return self._sink.take()

    def finish(self) -> bytes:
        self._mux(None)
        self._container.close()
        return self._sink.take()

    def _mux(self, frame: object | None) -> None:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)


def available_formats() -> tuple[str, ...]:
    """The formats this environment can encode: AAC only where PyAV is installed (the ``gateway`` extra)."""
    has_av = importlib.util.find_spec("av") is not None
    return tuple(name for name, fmt in FORMATS.items() if fmt.sf_format is not None or has_av)


def new_encoder(response_format: str, rate: int) -> Encoder:
    """A fresh encoder for ``response_format`` (a key of :data:`FORMATS`) fed at ``rate`` Hz."""
    fmt = FORMATS[response_format]
    return AacEncoder(rate) if fmt.sf_format is None else SoundfileEncoder(fmt, rate)
