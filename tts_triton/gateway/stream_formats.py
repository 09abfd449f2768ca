"""ElevenLabs' ``output_format`` values (``pcm_24000``, ``mp3_44100_128``, ``ulaw_8000``...) as streaming encoders.

``pcm_<rate>`` is raw 16-bit little-endian mono, ``ulaw_8000`` raw G.711 mu-law (telephony), ``mp3_<rate>_<kbps>``
constant bit rate MP3; each resampled from the model's rate by soxr, carried across the session's pieces.
"""

from __future__ import annotations

from .encoders import Encoder, OutputFormat, SoundfileEncoder

__all__ = ["DEFAULT_OUTPUT_FORMAT", "STREAM_FORMATS", "new_stream_encoder", "stream_format"]

#: ElevenLabs' default.
DEFAULT_OUTPUT_FORMAT = "mp3_44100_128"
_PCM_RATES = (8_000, 16_000, 22_050, 24_000, 44_100, 48_000)
_MP3 = ((22_050, 32), (44_100, 32), (44_100, 64), (44_100, 96), (44_100, 128), (44_100, 192))

STREAM_FORMATS: dict[str, OutputFormat] = {f.name: f for f in (
    *(OutputFormat(f"pcm_{rate}", "audio/pcm", "RAW", "PCM_16", rate) for rate in _PCM_RATES),
    OutputFormat("ulaw_8000", "audio/basic", "RAW", "ULAW", 8_000),
    *(OutputFormat(f"mp3_{rate}_{kbps}", "audio/mpeg", "MP3", "MPEG_LAYER_III", rate, bitrate_kbps=kbps)
      for rate, kbps in _MP3),
)}


def stream_format(name: str) -> OutputFormat:
    """The format called ``name``; raises ValueError naming the ones there are."""
    try:
        return STREAM_FORMATS[name]
    except KeyError:
        raise ValueError(f"output_format {name!r:.40} is not one of {', '.join(STREAM_FORMATS)}") from None


def new_stream_encoder(fmt: OutputFormat, rate: int) -> Encoder:
    """A fresh encoder of ``fmt`` fed at ``rate`` Hz."""
    return SoundfileEncoder(fmt, rate)
