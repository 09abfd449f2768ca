"""Audio conventions shared by training, export, the server and the tests.

The constants follow the HiFi-GAN / Tacotron2 LJSpeech convention (22050 Hz, n_fft 1024, hop 256,
window 1024, Slaney mel, natural-log magnitude mel clamped at 1e-5) except for the mel layout: 128
bins over the whole 0-11025 Hz instead of 80 over 0-8000 Hz. The band above 8 kHz is part of the
voice, and 80 bins blur the harmonics of low voices; ``scripts/mel_band.py`` measures both (see
docs/records/mel_band.md: low-passing espeak-ng's rendering at 8 kHz alone costs ~20 dB of MCD; Griffin-Lim
lands ~22 dB away from an 80-bin 8 kHz mel, 3.5 dB from an 80-bin full-band one and 3.0 dB from this
layout, with F0 errors of 12-16 Hz on sad male voices at 80 bins and 1-2 Hz at 128). A public LJSpeech
generator expects the old layout (``tts_triton.training.remel`` carries checkpoints across layouts).

An utterance of ``n`` samples has exactly ``n // HOP_LENGTH`` mel frames (reflect padding of
``(N_FFT - HOP_LENGTH) / 2`` on both sides, no centring), and a vocoder turns ``f`` frames into
``f * HOP_LENGTH`` samples.

``mel_spectrogram`` (numpy, used by the server and the data pipeline) and
``mel_spectrogram_torch`` (differentiable, used by training losses) compute the same thing.
"""

from __future__ import annotations

import functools
import os
import wave
from math import gcd
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is optional at serving time
    import torch

SAMPLE_RATE = 22050
N_FFT = 1024
HOP_LENGTH = 256
WIN_LENGTH = 1024
N_MELS = 128
FMIN = 0.0
FMAX = SAMPLE_RATE / 2.0
LOG_CLAMP = 1e-5
#: Reflect padding on each side of the signal before framing (frames are not centred on the hop grid).
FRAME_PAD = (N_FFT - HOP_LENGTH) // 2
#: Added to the squared STFT magnitude before its square root.
MAGNITUDE_EPS = 1e-9
#: Log-mel value of digital silence (``log(LOG_CLAMP)``).
SILENCE_LOG_MEL = float(np.log(LOG_CLAMP))


def hz_to_mel(freq: np.ndarray) -> np.ndarray:
    """Slaney mel scale: linear below 1 kHz, logarithmic above (librosa's ``htk=False``)."""
    freq = np.asarray(freq, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = freq / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(freq >= min_log_hz, min_log_mel + np.log(np.maximum(freq, 1e-10) / min_log_hz) / logstep, mels)


def mel_to_hz(mels: np.ndarray) -> np.ndarray:
    """Inverse of :func:`hz_to_mel`."""
    mels = np.asarray(mels, dtype=np.float64)
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(mels >= min_log_mel, min_log_hz * np.exp(logstep * (mels - min_log_mel)), f_sp * mels)


def mel_points(n_mels: int = N_MELS, fmin: float = FMIN, fmax: float = FMAX) -> np.ndarray:
    """The ``n_mels + 2`` filter edges (Hz), evenly spaced on the Slaney mel scale; filter ``i`` peaks at ``i + 1``."""
    return mel_to_hz(np.linspace(hz_to_mel(np.float64(fmin)), hz_to_mel(np.float64(fmax)), n_mels + 2))


@functools.lru_cache(maxsize=4)
def mel_filterbank(
    sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS, fmin: float = FMIN, fmax: float = FMAX
) -> np.ndarray:
    """Slaney-normalised triangular mel filters, shape ``[n_mels, n_fft // 2 + 1]`` (librosa's default)."""
    fft_freqs = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    mel_pts = mel_points(n_mels, fmin, fmax)
    fdiff = np.diff(mel_pts)
    ramps = mel_pts[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_pts[2 : n_mels + 2] - mel_pts[:n_mels]))[:, None]
    weights.setflags(write=False)
    return weights.astype(np.float32)


@functools.lru_cache(maxsize=1)
def hann_window() -> np.ndarray:
    """The analysis window: periodic Hann of ``WIN_LENGTH`` (as ``torch.hann_window``), float32."""
    n = np.arange(WIN_LENGTH)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * n / WIN_LENGTH)).astype(np.float32)  # periodic, like torch


def mel_spectrogram(audio: np.ndarray) -> np.ndarray:
    """Log-mel spectrogram of mono float audio in [-1, 1] at SAMPLE_RATE: ``[frames, N_MELS]`` float32."""
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"expected mono audio of shape [samples], got {audio.shape}")
    pad = FRAME_PAD
    if audio.shape[0] <= pad:
        audio = np.pad(audio, (0, pad + 1 - audio.shape[0]))
    padded = np.pad(audio, (pad, pad), mode="reflect")
    n_frames = 1 + (padded.shape[0] - N_FFT) // HOP_LENGTH
    frames = np.lib.stride_tricks.as_strided(
        padded, shape=(n_frames, N_FFT), strides=(padded.strides[0] * HOP_LENGTH, padded.strides[0])
    )
    spec = np.fft.rfft(frames * hann_window(), axis=-1)
    magnitude = np.sqrt(spec.real.astype(np.float32) ** 2 + spec.imag.astype(np.float32) ** 2 + MAGNITUDE_EPS)
    mel = magnitude @ mel_filterbank().T
    return np.log(np.maximum(mel, LOG_CLAMP)).astype(np.float32)


@functools.lru_cache(maxsize=8)
def _filterbank_tensor(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """:func:`mel_filterbank` on ``device``, made once: a copy from the host per call would also break a CUDA graph
    capture of a training step. Never an inference tensor, which autograd could not save for a later backward."""
    import torch

    with torch.inference_mode(False):
        return torch.from_numpy(np.asarray(mel_filterbank())).to(device, dtype)


def mel_spectrogram_torch(audio: torch.Tensor) -> torch.Tensor:
    """Differentiable twin of :func:`mel_spectrogram`: ``[B, samples] -> [B, frames, N_MELS]``."""
    import torch

    pad = FRAME_PAD
    x = torch.nn.functional.pad(audio.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    window = torch.hann_window(WIN_LENGTH, device=audio.device, dtype=audio.dtype)
    spec = torch.stft(x, N_FFT, HOP_LENGTH, WIN_LENGTH, window, center=False, return_complex=True)
    magnitude = torch.sqrt(spec.real.pow(2) + spec.imag.pow(2) + MAGNITUDE_EPS)
    mel = torch.matmul(_filterbank_tensor(audio.device, audio.dtype), magnitude).transpose(1, 2)
    return torch.log(torch.clamp(mel, min=LOG_CLAMP))


def resample(audio: np.ndarray, orig_rate: int, target_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Band-limited polyphase resampling of mono float audio."""
    if orig_rate == target_rate:
        return np.asarray(audio, dtype=np.float32)

    from scipy.signal import resample_poly

    g = gcd(int(orig_rate), int(target_rate))
    return resample_poly(np.asarray(audio, dtype=np.float64), target_rate // g, orig_rate // g).astype(np.float32)


def save_wav(path: str | os.PathLike, samples: np.ndarray, sample_rate: int) -> Path:
    """Write mono float audio as 16-bit PCM WAV; samples outside [-1, 1] are clipped. Returns the path.

    The standard library's ``wave`` writes it, so the trainers run where soundfile and tritonclient are missing
    (a bare GPU host's Python)."""
    mono = np.asarray(samples, dtype=np.float32)
    if mono.ndim != 1:
        raise ValueError(f"expected mono audio of shape [samples], got {mono.shape}")
    path = Path(path)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(int(sample_rate))
        out.writeframes((np.clip(mono, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes())
    return path


#: The size a streamed WAV header gives its RIFF and ``data`` chunks while the length is unknown (the largest
#: 32-bit value: readers then read to the end of the stream; ffmpeg and Python's ``wave`` accept it).
WAV_UNKNOWN_SIZE = 0xFFFFFFFF


def wav_header(sample_rate: int, data_bytes: int | None = None) -> bytes:
    """The 44-byte header of mono 16-bit PCM WAV with ``data_bytes`` of samples; None: a stream of unknown
    length (:data:`WAV_UNKNOWN_SIZE`)."""
    import struct

    data = WAV_UNKNOWN_SIZE if data_bytes is None else data_bytes
    riff = WAV_UNKNOWN_SIZE if data_bytes is None else 36 + data_bytes
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", riff, b"WAVE", b"fmt ", 16, 1, 1, sample_rate,
                       sample_rate * 2, 2, 16, b"data", data)


def pcm16(samples: np.ndarray) -> bytes:
    """Float samples as 16-bit little-endian PCM bytes, clipped to [-1, 1] (as :func:`save_wav` writes them)."""
    return (np.clip(np.asarray(samples, np.float32), -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """``10 log10(|reference|^2 / |test - reference|^2)`` over equal-length signals (identical ones: about 300)."""
    noise = float(np.sum((np.asarray(test, np.float64) - reference) ** 2))
    return 10 * float(np.log10(max(float(np.sum(np.asarray(reference, np.float64) ** 2)), 1e-30) / max(noise, 1e-30)))
