"""Speech controls on the decoder's mel and the vocoder's audio: rate, pitch and volume, stream-safe.

The decoder runs as trained; the controls act between it and the vocoder, so every runtime target
behaves alike and nothing is retrained:

- **Rate** time-scales the mel: output frame ``j`` is the source mel linearly interpolated at
  ``j * speed``. Frames are produced as soon as both neighbours exist, so the streamed mel equals the
  one-shot mel exactly; the vocoder regenerates the phase of the resampled frames.
- **Pitch** moves the harmonics and keeps the formants, frame by frame: the log-mel is split into an
  envelope (its first :data:`ENVELOPE_COEFFICIENTS` DCT coefficients) and the fine structure (the rest);
  the fine structure is resampled along frequency by ``2 ** (semitones / 12)`` and added back to the
  envelope. That is one fixed ``n_mels x n_mels`` matrix per shift; the vocoder follows the harmonics, a
  little behind: the mel's harmonics move :data:`VOCODER_LAG` semitones further than asked. Each frame's
  energy in the linear domain is then restored (:func:`frame_energy`), so the mel asks for the loudness it had.
  The vocoder does not deliver it: shifted harmonics come out up to 3 dB louder or softer (at -12 st a voice's
  fundamental falls below what the vocoder renders; a few semitones up, the stretched harmonic peaks come out
  louder), nearly all of it below 500 Hz, where voiced speech has ~90% of its energy. So the vocoded audio of a
  shifted mel is held to the mel's energy (:func:`keep_level`): a gain that varies slowly over time, measured
  on the audio itself, within each vocoder window (its context frames cover the smoothing).
- **Volume** is a gain in dB with a memoryless soft limiter (linear below :data:`LIMIT_KNEE`, tanh
  above, never past 1), applied to each vocoded chunk: chunk by chunk it is the one-shot result.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from tts_triton.core import audio
from tts_triton.core.contract import CONTROLS, PITCH, SPEED, VOLUME

#: DCT coefficients of a log-mel frame that make its envelope (formants); the rest is harmonic fine structure.
#: 12 of 128: with 24, a +12 st shift reached only 1.83x F0 on the default voice; 12 gave 2.00x; 8 or 16
#: moved no voice's +-4 st result nearer its target.
ENVELOPE_COEFFICIENTS = 12
#: Semitones added to a shift of one semitone or more, in its direction (less: in proportion): the vocoder lags
#: the mel a little. For the shipped vocoder (fine-tuned on slt's teacher-forced mels), 0.15 keeps 9 of 11 voices
#: within +-0.06 of 1.26x at +-4 st (slt 1.272x / 0.786x; 0: 1.254x on the held-out sentences, 1.197x on
#: test_controls' sentence at rate 1.5; 0.3: 8 of 11); m1 and m8 stay out: the vocoder renders no F0 under ~75 Hz.
#: A property of the vocoder: re-measure it with ``python -m tts_triton.evaluate.pitch`` when that changes.
VOCODER_LAG = 0.15
#: Amplitude above which the limiter bends the waveform (below it, the gain is exact).
LIMIT_KNEE = 0.9
#: Frames each side over which :func:`keep_level` sums energies (triangular weights): +-93 ms, a level, not a
#: frame's envelope. Below the vocoder windows' contexts (12), less the 2-3 edge frames that their STFT pads.
LEVEL_FRAMES = 8
#: Energy (dB over a frame of digital silence, per frame of the sums) added to both sides of :func:`keep_level`'s
#: ratio: near-silent stretches (speech frames are 50-85 dB over it) keep a gain of about 1.
LEVEL_FLOOR_DB = 20.0
#: The most :func:`keep_level` changes the level (dB), either way.
LEVEL_MAX_DB = 12.0
#: Pitch shifts are rounded to this many semitones, so a few matrices serve all requests.
PITCH_STEP = 0.01


def clamp(name: str, value: float) -> float:
    """``value`` limited to the range of control ``name`` (combined request and markup values)."""
    c = CONTROLS[name]
    return min(max(value, c.low), c.high)


@dataclass(frozen=True)
class Controls:
    """Rate factor, pitch shift in semitones and gain in dB; the defaults leave speech as trained."""

    speed: float = 1.0
    pitch: float = 0.0
    volume: float = 0.0

    def combine(self, rate: float = 1.0, pitch: float = 0.0, volume: float = 0.0) -> Controls:
        """These controls with a sentence's markup applied (rate multiplies, pitch and volume add), each
        clamped to its contract range."""
        return Controls(clamp(SPEED, self.speed * rate), clamp(PITCH, self.pitch + pitch),
                        clamp(VOLUME, self.volume + volume))

    @property
    def neutral(self) -> bool:
        return self.speed == 1.0 and self.pitch == 0.0 and self.volume == 0.0

    @property
    def shifts_pitch(self) -> bool:
        """Whether :func:`shift_pitch` changes the mel (then the vocoded audio gets :func:`keep_level`)."""
        return _steps(self.pitch) != 0

    @property
    def keeps_frames(self) -> bool:
        """Whether the vocoded mel is the decoder's own, frame for frame (no time scaling, no mel warp)."""
        return self.speed == 1.0 and not self.shifts_pitch


#: No control: speech as trained.
AS_TRAINED = Controls()


def frequency_warp(ratio: float, n_mels: int) -> np.ndarray:
    """``[n_mels, n_mels]``: row ``i`` reads a log-mel frame where the component now at bin ``i``'s centre came
    from, ``centre_i / ratio`` (linear interpolation between bins; clamped at the band's ends)."""
    k = np.arange(n_mels)
    centres = audio.mel_points(n_mels)[1:-1]
    position = np.interp(audio.hz_to_mel(centres / ratio), audio.hz_to_mel(centres), k)
    lo = np.minimum(np.floor(position).astype(int), n_mels - 2)
    frac = position - lo
    warp = np.zeros((n_mels, n_mels))
    warp[k, lo] = 1.0 - frac
    warp[k, lo + 1] += frac
    return warp


def _steps(semitones: float) -> int:
    return round(semitones / PITCH_STEP)


@functools.lru_cache(maxsize=64)
def _pitch_matrix(steps: int, n_mels: int, lag: float) -> np.ndarray:
    semitones = steps * PITCH_STEP
    moved = semitones + math.copysign(min(abs(semitones), 1.0) * lag, semitones)
    k = np.arange(n_mels)
    # Orthonormal DCT-II basis (rows = coefficients): envelope = B_low.T @ B_low @ x.
    basis = np.cos(np.pi * (k[None, :] + 0.5) * k[:, None] / n_mels) * np.sqrt(2.0 / n_mels)
    basis[0] /= np.sqrt(2.0)
    low = basis[:ENVELOPE_COEFFICIENTS]
    envelope = low.T @ low
    matrix = envelope + frequency_warp(2.0 ** (moved / 12.0), n_mels) @ (np.eye(n_mels) - envelope)
    return np.ascontiguousarray(matrix.T, dtype=np.float32)  # frames @ matrix


@functools.lru_cache(maxsize=4)
def _band_widths(n_mels: int) -> np.ndarray:
    """Each mel filter's width in Hz (half the distance between its edges): a bin's weight in the frame's energy."""
    edges = audio.mel_points(n_mels)
    return (edges[2:] - edges[:-2]) / 2.0


def frame_energy(mel: np.ndarray) -> np.ndarray:
    """``[n]``: each log-mel frame's energy in the linear domain, ``sum_i width_i * exp(2 * mel_i)`` (a bin holds
    its band's mean magnitude; its power times its width is the band's share)."""
    return np.exp(2.0 * mel.astype(np.float64)) @ _band_widths(mel.shape[1])


def shift_pitch(mel: np.ndarray, semitones: float, lag: float = VOCODER_LAG) -> np.ndarray:
    """Log-mel frames ``[n, n_mels]`` whose vocoded F0 is ``2 ** (semitones / 12)`` times theirs, formants and
    loudness kept: the harmonics move by ``semitones`` plus ``lag`` (:data:`VOCODER_LAG`) in its direction, then
    each frame is offset so that its :func:`frame_energy` is what it was (moving harmonics across bands of
    different widths would change it: +6.5 dB at +12 st, -7.2 dB at -12 st before). Frame by frame, so a
    stream's chunks still join into the one-shot result."""
    steps = _steps(semitones)
    if steps == 0 or len(mel) == 0:
        return mel
    shifted = mel @ _pitch_matrix(steps, mel.shape[1], lag)
    offset = 0.5 * np.log(frame_energy(mel) / frame_energy(shifted))
    return (shifted + offset[:, None].astype(np.float32)).astype(np.float32, copy=False)


@functools.lru_cache(maxsize=4)
def _silent_energy(n_mels: int) -> float:
    return float(frame_energy(np.full((1, n_mels), audio.SILENCE_LOG_MEL, np.float32))[0])


def keep_level(samples: np.ndarray, mel: np.ndarray) -> np.ndarray:
    """``samples``, vocoded from the log-mel frames ``mel`` (``HOP_LENGTH`` samples each), scaled so that their
    energy is the mel's: at frame ``j`` by ``sqrt(sum_k w_k E_mel[j+k] / sum_k w_k E_audio[j+k])`` over
    ``|k| <= LEVEL_FRAMES`` (triangular ``w``; :func:`frame_energy` of ``mel`` and of the audio's own log-mel,
    each sum raised by :data:`LEVEL_FLOOR_DB` over silence, the gain bounded by :data:`LEVEL_MAX_DB`),
    interpolated between frame centres, then soft-limited as :func:`apply_gain` does. Frame ``j``'s gain
    depends only on frames ``j +- (LEVEL_FRAMES + 3)``: a vocoder window with that much context on each side
    gives its inner frames the one-shot gains."""
    n = min(len(mel), len(samples) // audio.HOP_LENGTH)
    if n == 0:
        return samples
    weights = np.bartlett(2 * LEVEL_FRAMES + 3)[1:-1]
    floor = _silent_energy(mel.shape[1]) * 10.0 ** (LEVEL_FLOOR_DB / 10.0) * weights.sum()
    wanted = np.convolve(frame_energy(mel[:n]), weights)[LEVEL_FRAMES:LEVEL_FRAMES + n] + floor
    got = np.convolve(frame_energy(audio.mel_spectrogram(samples)[:n]), weights)[LEVEL_FRAMES:LEVEL_FRAMES + n] + floor
    bound = 10.0 ** (LEVEL_MAX_DB / 20.0)
    gain = np.clip(np.sqrt(wanted / got), 1.0 / bound, bound)
    centres = np.arange(n) * audio.HOP_LENGTH + audio.HOP_LENGTH // 2  # frame j's STFT window is centred there
    return soft_limit((samples * np.interp(np.arange(len(samples)), centres, gain)).astype(np.float32))


def apply_gain(samples: np.ndarray, db: float) -> np.ndarray:
    """``samples`` times ``10 ** (db / 20)``, soft-limited (:func:`soft_limit`)."""
    if db == 0.0:
        return samples
    return soft_limit(samples * np.float32(10.0 ** (db / 20.0)))


def soft_limit(samples: np.ndarray) -> np.ndarray:
    """``samples`` (float32) bent above :data:`LIMIT_KNEE` (tanh) to stay inside (-1, 1); a copy where any is."""
    over = np.abs(samples) > LIMIT_KNEE
    if not over.any():
        return samples
    out = samples.copy()
    room = 1.0 - LIMIT_KNEE
    out[over] = np.sign(out[over]) * (LIMIT_KNEE + room * np.tanh((np.abs(out[over]) - LIMIT_KNEE) / room))
    return out


class TimeScaler:
    """One sentence's mel at ``speed``: output frame ``j`` interpolates the source at ``j * speed``.

    Feed the growing source mel to :meth:`extend`; it returns the output frames that became computable,
    identical to scaling the finished mel at once. The finished sentence has ``round(n / speed)``
    frames (at least one) for ``n`` source frames.
    """

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.produced = 0

    def extend(self, source: np.ndarray, finished: bool) -> np.ndarray:
        n = len(source)
        if self.speed == 1.0:
            start, self.produced = self.produced, n
            return source[start:]
        if finished:
            total = max(1, round(n / self.speed)) if n else 0
        else:  # frame j needs source frames floor(j * speed) and the one after it
            total = max(0, math.floor((n - 2) / self.speed) + 1) if n >= 2 else 0
        if total <= self.produced:
            return source[:0]
        position = np.minimum(np.arange(self.produced, total) * self.speed, n - 1)
        lo = np.minimum(np.floor(position).astype(int), max(n - 2, 0))
        hi = np.minimum(lo + 1, n - 1)
        frac = (position - lo)[:, None].astype(np.float32)
        self.produced = total
        return (source[lo] * (1.0 - frac) + source[hi] * frac).astype(np.float32)


def pause_frames(seconds: float) -> int:
    """Mel frames (of HOP_LENGTH samples) nearest to ``seconds`` of silence."""
    return max(0, round(seconds * audio.SAMPLE_RATE / audio.HOP_LENGTH))
