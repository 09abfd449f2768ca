"""Reading reference audio and writing synthesized audio."""

from __future__ import annotations

import os

import numpy as np
import soundfile as sf

from tts_triton.core.audio import save_wav

from .errors import InvalidInputError

__all__ = ["ReferenceAudio", "load_reference_audio", "save_wav"]

#: A reference recording: samples (any shape ``[samples]`` / ``[samples, channels]``) or a file path.
ReferenceAudio = np.ndarray | str | os.PathLike


def load_reference_audio(source: ReferenceAudio, sample_rate: int | None = None) -> tuple[np.ndarray, int]:
    """Reference audio as ``(mono float32 samples, sample rate)``.

    ``source`` is a path to any file soundfile reads (its own rate is used; ``sample_rate`` must be
    None) or an array with ``sample_rate`` given. Arrays are ``[samples]`` or two-dimensional with
    channels on the shorter axis (``[samples, channels]`` or ``[channels, samples]``); channels are
    averaged. Integer PCM is scaled to [-1, 1). Raises :class:`InvalidInputError` naming the input.
    """
    if isinstance(source, str | os.PathLike):
        if sample_rate is not None:
            raise InvalidInputError("REFERENCE_SAMPLE_RATE: not accepted with a reference audio file, whose own "
                                    "rate is used")
        try:
            data, sample_rate = sf.read(os.fspath(source), dtype="float32", always_2d=True)
        except (sf.LibsndfileError, OSError) as e:
            raise InvalidInputError(f"REFERENCE_AUDIO: cannot read {os.fspath(source)!r}: {e}") from e
        data = data.mean(axis=1)
    else:
        data = np.asarray(source)
        if sample_rate is None:
            raise InvalidInputError("REFERENCE_SAMPLE_RATE: required with a reference audio array")
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int | np.integer) or sample_rate <= 0:
        raise InvalidInputError(f"REFERENCE_SAMPLE_RATE: expected a positive integer, got {sample_rate!r}")
    if data.ndim not in (1, 2):
        raise InvalidInputError(f"REFERENCE_AUDIO: expected [samples] or [samples, channels], got shape {data.shape}")
    if not np.issubdtype(data.dtype, np.floating):
        data = _pcm_to_float(data)
    if data.ndim == 2:
        data = data.mean(axis=int(np.argmin(data.shape)))
    if data.size == 0:
        raise InvalidInputError("REFERENCE_AUDIO: no samples")
    return np.ascontiguousarray(data, dtype=np.float32), int(sample_rate)


def _pcm_to_float(data: np.ndarray) -> np.ndarray:
    if not np.issubdtype(data.dtype, np.integer):
        raise InvalidInputError(f"REFERENCE_AUDIO: expected float or integer PCM samples, got dtype {data.dtype}")
    info = np.iinfo(data.dtype)
    half = (info.max - info.min + 1) / 2
    return (data.astype(np.float64) - (info.min + half)) / half  # unsigned PCM is centred mid-range
