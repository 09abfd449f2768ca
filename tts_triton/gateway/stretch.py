"""OpenAI's ``speed`` range (0.25-4) on a model whose own rate control spans 0.5-2, without changing the pitch.

:func:`split_speed` gives the model all of the factor it can take (its rate control time-scales the mel and the
vocoder makes new phase: the cleanest way) and leaves the rest, up to 2x either way, to :class:`TimeStretch`, a
streaming WSOLA (waveform-similarity overlap-add, Verhelst and Roelands 1993) on the decoded audio: frames of
30 ms are read at ``speed`` times the pace they are written at, each shifted by up to 12 ms (longer than the pitch
period of voices above 83 Hz) to where it best continues the frame before it, so pitch periods join up instead of
cancelling, and overlap-added with a Hann window (which sums to one at half-frame hops). It is chunk-safe: fed
the audio in any pieces, it writes the samples that are final as they become so, the same as for the whole.
"""

from __future__ import annotations

import numpy as np

from tts_triton.core.contract import CONTROLS, SPEED

__all__ = ["TimeStretch", "split_speed"]

#: Seconds of output between frames (half a 30 ms frame): long enough to hold two pitch periods of most voices.
HOP_S = 0.015
#: Seconds a frame may move from its nominal place to join its predecessor: a period of an 83 Hz voice.
TOLERANCE_S = 0.012


def split_speed(speed: float) -> tuple[float, float]:
    """``(model, stretch)`` with ``model * stretch == speed``: the model's rate control takes what its range
    allows (``CONTROLS[SPEED]``), the time-stretch the rest (1.0: none)."""
    control = CONTROLS[SPEED]
    model = min(max(speed, control.low), control.high)
    return model, speed / model


class TimeStretch:
    """``speed`` times faster audio at the same pitch (``speed`` < 1: slower), mono float32 at ``rate`` Hz,
    fed with :meth:`process` and closed with :meth:`finish`; the output has ``round(n / speed)`` samples for
    ``n`` in."""

    def __init__(self, speed: float, rate: int) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.hop = max(1, round(HOP_S * rate))
        self.size = 2 * self.hop
        self.tolerance = round(TOLERANCE_S * rate)
        self.window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(self.size) / self.size)).astype(np.float32)
        self._x = np.zeros(0, np.float32)  # input from absolute sample _x0 on
        self._x0 = 0
        self._received = 0
        self._y = np.zeros(0, np.float32)  # output from absolute sample _y0 on, not yet handed out
        self._y0 = 0
        self._frame = 0
        self._previous = 0  # input position of the last frame placed

    def process(self, audio: np.ndarray) -> np.ndarray:
        """Take the next ``audio`` and return the output samples that are final now."""
        self._x = np.concatenate([self._x, np.asarray(audio, np.float32)])
        self._received += len(audio)
        return self._run(final=False)

    def finish(self) -> np.ndarray:
        """The rest of the output, once the input has ended."""
        return self._run(final=True)

    def _input(self, start: int, end: int) -> np.ndarray:
        """Input samples ``[start, end)`` (absolute), zeros past the end of what was received."""
        part = self._x[start - self._x0:end - self._x0]
        return part if len(part) == end - start else np.pad(part, (0, end - start - len(part)))

    def _place(self, position: int) -> int:
        """The input position of frame ``self._frame`` (its nominal place, moved to best continue the last)."""
        nominal = round(self._frame * self.hop * self.speed)
        if self._frame == 0:
            return nominal
        low = max(nominal - self.tolerance, self._x0)
        region = self._input(low, nominal + self.tolerance + self.size)
        template = self._input(position + self.hop, position + self.hop + self.size)
        correlation = np.correlate(region, template, "valid")
        power = np.concatenate([[0.0], np.cumsum(region.astype(np.float64) ** 2)])
        energy = power[self.size:] - power[:-self.size]
        return low + int(np.argmax(correlation / np.sqrt(energy + 1e-9)))

    def _run(self, *, final: bool) -> np.ndarray:
        total = round(self._received / self.speed) if final else None
        while total is None or self._frame * self.hop < total:
            nominal = round(self._frame * self.hop * self.speed)
            needed = max(nominal + self.tolerance, self._previous + self.hop) + self.size
            if not final and needed > self._received:
                break
            position = self._place(self._previous)
            frame = self._input(position, position + self.size) * self.window
            if self._frame == 0:  # nothing overlaps its first half
                frame[:self.hop] = self._input(position, position + self.hop)
            start = self._frame * self.hop - self._y0
            if len(self._y) < start + self.size:
                self._y = np.pad(self._y, (0, start + self.size - len(self._y)))
            self._y[start:start + self.size] += frame
            self._previous, self._frame = position, self._frame + 1
            keep = min(self._previous + self.hop, round(self._frame * self.hop * self.speed) - self.tolerance)
            if keep > self._x0:
                self._x, self._x0 = self._x[keep - self._x0:], keep
        ready = max((self._frame * self.hop if total is None else total) - self._y0, 0)
        out, self._y, self._y0 = self._y[:ready], self._y[ready:], self._y0 + ready
        return out
