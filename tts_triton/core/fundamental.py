"""The fundamental of a log-mel spectrogram, frame by frame: its frequency and its running phase.

The vocoder draws the phase of its lowest bins from a harmonic model (:mod:`tts_triton.models.harmonic`), which
needs, for every frame, the fundamental frequency ``f0`` and the fundamental's phase at the frame's centre. Both
come from the log-mel the vocoder is given, computed here once for every caller (the serving pipeline, the
in-process evaluation), so that a streamed window and one-shot vocoding agree:

- ``f0`` of a frame depends on that frame alone: a harmonic-sum score of :data:`CANDIDATES` over the mel bands
  below :data:`SCORE_MAX_HZ` (each candidate's harmonics minus the points halfway between them, on the frame's
  level relative to its loudest band), best candidate refined by a parabola. Frames it puts below
  :data:`MIN_F0` (low voices) or whose harmonics stand out too little (:data:`MIN_CONTRAST`: noise, silence) get 0:
  the vocoder keeps its own phase there.
- The phase integrates ``f0`` from frame to frame (trapezoid rule at the hop), 0 at the sentence's first frame.
  A window reaching before that (into the silence the planner pads with) continues it backwards.

:class:`FundamentalTrack` keeps one sentence's track as its mel grows, each frame scored once.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tts_triton.core import audio

#: Lowest and highest fundamental searched (Hz): below the lowest male voices, above the highest raised female.
F0_RANGE = (60.0, 500.0)
#: Candidates' spacing in semitones; the parabola refines the best to a fraction of it.
STEP_SEMITONES = 0.25
#: Harmonics scored lie below this frequency (Hz), where the mel bands (25.6 Hz apart below 1 kHz) resolve them.
SCORE_MAX_HZ = 2000.0
#: Bands more than this many nepers (~70 dB) under the frame's loudest one count as silent.
FLOOR_NEPERS = 8.0
#: Frames whose estimate falls below this (Hz) keep the vocoder's own phase: the harmonic model cost the low male
#: voices naturalness ("Thirteenth candidate" of docs/records/teacher.md), while from here up to the former 140 Hz it
#: lifts the default voice lowered 4 semitones by 0.3-0.4 ("Fifteenth candidate").
MIN_F0 = 100.0
#: Frames whose best score, per unit of level in the scored bands, is not above this are unvoiced: it keeps the model
#: off 0-9 % of the frames harvest calls unvoiced (without it: 63-74 %), and 77-84 % of the female voiced ones on
#: (docs/records/teacher.md, "Thirteenth candidate").
MIN_CONTRAST = 0.01
#: The two values per frame the vocoder takes: ``f0`` (Hz; 0 = keep the vocoder's phase) and phase (rad).
FIELDS = 2

#: The key under which a serving backend returns a decoder call's :func:`estimate` ``[rows, frames]`` beside its
#: outputs (:mod:`tts_triton.serving.fundamentals`): not a network tensor.
DECODED_F0 = "f0"

#: Candidate fundamentals (Hz), evenly spaced in pitch.
CANDIDATES = F0_RANGE[0] * 2.0 ** (
    np.arange(0.0, 12.0 * math.log2(F0_RANGE[1] / F0_RANGE[0]) + 1e-9, STEP_SEMITONES) / 12.0)


@functools.lru_cache(maxsize=1)
def score_matrix() -> np.ndarray:
    """``[len(CANDIDATES), N_MELS]`` float32: a frame's levels times its transpose give each candidate's score
    (levels interpolated linearly between band centres at each harmonic, minus at each half-way point)."""
    centres = audio.mel_points()[1:-1]
    eye = np.eye(len(centres))
    out = np.zeros((len(CANDIDATES), len(centres)))
    for h in range(1, int(SCORE_MAX_HZ // F0_RANGE[0]) + 1):
        on = h * CANDIDATES < SCORE_MAX_HZ
        for freq, sign in ((h * CANDIDATES, 1.0), ((h - 0.5) * CANDIDATES, -1.0)):
            weights = np.stack([np.interp(freq, centres, eye[:, j], left=0.0, right=0.0)
                                for j in range(len(centres))], axis=1)
            out += sign * on[:, None] * weights
    return out.astype(np.float32)


@functools.lru_cache(maxsize=1)
def _scoring() -> tuple[np.ndarray, int, int]:
    """(:func:`score_matrix` transposed and cut to the bands it weighs, ``[bands, len(CANDIDATES)]``; those bands,
    a prefix of the mel's; the bands whose centres lie below :data:`SCORE_MAX_HZ`, a shorter prefix). A frame is
    scored on its lowest bands alone: the others weigh nothing."""
    weights = score_matrix()
    bands = int(np.flatnonzero(np.abs(weights).sum(axis=0)).max()) + 1
    scored = int(np.count_nonzero(audio.mel_points()[1:-1] < SCORE_MAX_HZ))  # centres ascend: a prefix
    return np.ascontiguousarray(weights[:, :bands].T), bands, scored


def estimate(log_mel: np.ndarray) -> np.ndarray:
    """``f0`` (Hz, float64) of each frame of a natural-log mel ``[frames, N_MELS]``; 0 below :data:`MIN_F0` or
    :data:`MIN_CONTRAST`."""
    weights, bands, scored = _scoring()
    levels = np.maximum(log_mel[:, :bands] - log_mel.max(axis=1, keepdims=True) + FLOOR_NEPERS, 0.0)
    scores = levels @ weights
    frames = np.arange(len(scores))
    peak = scores.argmax(axis=1)
    contrast = scores[frames, peak] / np.maximum(levels[:, :scored].sum(axis=1), 1e-9)
    best = np.clip(peak, 1, len(CANDIDATES) - 2)
    a, b, c = (scores[frames, best + k].astype(np.float64) for k in (-1, 0, 1))
    curvature = a - 2.0 * b + c
    safe = np.where(curvature < 0.0, curvature, -1.0)
    offset = np.where(curvature < 0.0, np.clip(0.5 * (a - c) / safe, -0.5, 0.5), 0.0)
    f0 = CANDIDATES[best] * 2.0 ** (offset * STEP_SEMITONES / 12.0)
    return np.where((f0 >= MIN_F0) & (contrast > MIN_CONTRAST), f0, 0.0)


def _steps(f0: np.ndarray) -> np.ndarray:
    """The fundamental's phase advance between consecutive frames (rad), ``len(f0) - 1`` of them."""
    return math.pi * (f0[1:] + f0[:-1]) * audio.HOP_LENGTH / audio.SAMPLE_RATE


@functools.lru_cache(maxsize=1)
def _silence_f0() -> float:
    """The estimate of a silent frame (:data:`~tts_triton.core.audio.SILENCE_LOG_MEL` in every band)."""
    return float(estimate(np.full((1, audio.N_MELS), audio.SILENCE_LOG_MEL, np.float32))[0])


def _fields(f0: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """``[frames, FIELDS]`` float32: ``f0`` and the phase wrapped to [0, 2 pi)."""
    return np.stack([f0, np.mod(phase, 2.0 * math.pi)], axis=1).astype(np.float32)


def _phases(f0: np.ndarray, start: float = 0.0) -> np.ndarray:
    """The fundamental's phase at each frame of ``f0``, ``start`` at its first (float64, unwrapped)."""
    return start + np.concatenate([[0.0], np.cumsum(_steps(f0))])


class FundamentalTrack:
    """One sentence's ``f0`` and phase, frame by frame, as its log-mel grows by :meth:`extend`. Each frame's fields are
    made once, so that a window within the sentence is a slice; of the float64 values only the first frame's ``f0``
    (the silence before it runs back from there) and the last frame's (the next frames run on from there) are kept."""

    def __init__(self) -> None:
        self.fields = np.zeros((0, FIELDS), np.float32)
        self._first_f0 = 0.0
        self._last: tuple[float, float] | None = None  # the last frame's f0 and unwrapped phase

    def extend(self, frames: np.ndarray, f0: np.ndarray | None = None) -> None:
        """Append the sentence's next log-mel frames ``[n, N_MELS]``, given their :func:`estimate` ``f0`` where it is
        known (each frame's depends on that frame alone); the first frame's phase is 0."""
        f0 = estimate(frames) if f0 is None else np.asarray(f0, np.float64)
        if not len(f0):
            return
        if self._last is None:
            self._first_f0 = float(f0[0])
            phase = _phases(f0)
        else:  # the phase runs on from the last frame so far
            phase = _phases(np.concatenate([[self._last[0]], f0]), self._last[1])[1:]
        self._last = float(f0[-1]), float(phase[-1])
        self.fields = np.concatenate([self.fields, _fields(f0, phase)])

    def window(self, start: int, end: int) -> np.ndarray:
        """``[end - start, FIELDS]`` float32 for frames ``[start, end)``, ``0 < end <=`` the frames so far; frames
        before 0 are silence (:data:`~tts_triton.core.audio.SILENCE_LOG_MEL`), the phase run backwards into them."""
        if not 0 < end <= len(self.fields):
            raise ValueError(f"frames up to {end} asked of a track of {len(self.fields)}")
        if start >= 0:
            return self.fields[start:end]
        silence = np.full(-start, _silence_f0())
        back = np.cumsum(_steps(np.concatenate([silence, [self._first_f0]]))[::-1])[::-1]  # phase 0 at frame 0
        return np.concatenate([_fields(silence, -back), self.fields[:end]])


def track(log_mel: np.ndarray, origin: int = 0) -> np.ndarray:
    """The ``[frames, FIELDS]`` track of a whole log-mel ``[frames, N_MELS]`` vocoded in one piece, its phase 0 at
    frame ``origin`` (a sentence's first frame, after the silence before it): what :class:`FundamentalTrack` gives
    a streamed window of the same frames."""
    f0 = estimate(log_mel)
    phase = _phases(f0)
    return _fields(f0, phase - phase[origin])
