"""The voice bank: named style presets (voice x emotion), each a style vector for the decoder, and pitch axes.

A pitch axis is the direction in style space along which a voice's speech rises by one semitone, learned from its
teacher's own renderings a few semitones up and down (``prosody.Voice.pitch_variants``): the decoder then renders
a pitch shift itself, with the timbre it learned at that pitch, where the mel warp of
:func:`tts_triton.serving.controls.shift_pitch` moves harmonics under a fixed envelope. An axis holds over
``pitch_span`` semitones either way (the variants' reach); a shift beyond it is the warp's.

Stored as JSON next to the checkpoint and inside the ``tts`` model directory; the ``tts`` config
also carries it as the ``voice_bank`` parameter so that clients can list voices remotely.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.errors import InvalidInput

#: The corpus's natural male voice (flite's kal16): a preset of every bank whose checkpoint learned it.
NATURAL_MALE = "kal16"
#: The keys a voice bank's JSON object must have (``info``, free-form, and the pitch axes are optional).
REQUIRED_KEYS = ("voices", "emotions", "default_voice", "default_emotion", "presets")


@dataclass(frozen=True)
class PitchStyle:
    """How a pitch shift of ``semitones`` is rendered: ``offset`` added to the style (None: no axis), and the
    ``warp`` semitones left to :func:`tts_triton.serving.controls.shift_pitch`."""

    offset: np.ndarray | None
    warp: float

@dataclass
class VoiceBank:
    """Named style presets; valid by construction (every voice x emotion has a preset, the defaults are in it)."""

    voices: list[str]
    emotions: list[str]
    default_voice: str
    default_emotion: str
    #: voice -> emotion -> style vector
    presets: dict[str, dict[str, list[float]]]
    info: dict[str, Any] = field(default_factory=dict)
    #: voice -> style offset per semitone (see the module docstring); a style of reference audio uses the default
    #: voice's, a voice without one the warp alone
    pitch_axes: dict[str, list[float]] = field(default_factory=dict)
    #: semitones either way over which the axes hold (0 without axes)
    pitch_span: float = 0.0

    def pitch_axis(self, voice: str | None = None) -> np.ndarray | None:
        """``voice``'s pitch axis (None: the default voice's, for a style of reference audio); None when it has
        none."""
        axis = self.pitch_axes.get(voice or self.default_voice)
        return None if axis is None else np.asarray(axis, dtype=np.float32)

    def pitch_style(self, semitones: float, voice: str | None = None) -> PitchStyle:
        """A shift of ``semitones`` for ``voice``: along its axis up to :attr:`pitch_span`, the rest by the warp."""
        axis = self.pitch_axis(voice)
        if axis is None or semitones == 0.0:
            return PitchStyle(None, semitones)
        along = min(max(semitones, -self.pitch_span), self.pitch_span)
        return PitchStyle(along * axis, semitones - along)

    def __post_init__(self) -> None:
        if self.default_voice not in self.voices or self.default_emotion not in self.emotions:
            raise ValueError("the default voice and emotion must be in the bank")
        missing = [(v, e) for v in self.voices for e in self.emotions if e not in self.presets.get(v, {})]
        if missing:
            raise ValueError(f"voice bank lacks presets for {missing[:5]}")

    def style(self, voice: str | None = None, emotion: str | None = None) -> np.ndarray:
        """The style vector of a preset; None picks the default. An unknown name raises
        :class:`~tts_triton.errors.InvalidInput` naming VOICE or EMOTION."""
        voice = voice or self.default_voice
        emotion = emotion or self.default_emotion
        if voice not in self.presets:
            raise InvalidInput("VOICE", f"{voice!r} is unknown; available voices: {', '.join(self.voices)}")
        if emotion not in self.presets[voice]:
            raise InvalidInput("EMOTION", f"{emotion!r} is unknown; available emotions: {', '.join(self.emotions)}")
        return np.asarray(self.presets[voice][emotion], dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        """The bank as its JSON object (:data:`REQUIRED_KEYS` and ``info``)."""
        axes = {"pitch_axes": self.pitch_axes, "pitch_span": self.pitch_span} if self.pitch_axes else {}
        return {"voices": self.voices, "emotions": self.emotions, "default_voice": self.default_voice,
                "default_emotion": self.default_emotion, "presets": self.presets, "info": self.info, **axes}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, source: str = "voice bank") -> VoiceBank:
        """A bank from its JSON object; ``ValueError`` naming ``source`` when a key is missing or the bank is
        inconsistent (a default outside it, a voice x emotion without a preset)."""
        missing = [key for key in REQUIRED_KEYS if key not in data] if isinstance(data, dict) else list(REQUIRED_KEYS)
        if missing:
            raise ValueError(f"{source} lacks {missing}; expected an object with keys {list(REQUIRED_KEYS)}")
        try:
            return cls(list(data["voices"]), list(data["emotions"]), data["default_voice"], data["default_emotion"],
                       data["presets"], dict(data.get("info") or {}), dict(data.get("pitch_axes") or {}),
                       float(data.get("pitch_span") or 0.0))
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"{source} is not a valid voice bank: {exc}") from None

    @classmethod
    def from_json(cls, text: str, source: str = "voice bank") -> VoiceBank:
        """:meth:`from_dict` of JSON text; ``ValueError`` naming ``source`` when it is not valid JSON."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source} is not valid JSON: {exc}") from None
        return cls.from_dict(data, source)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> VoiceBank:
        return cls.from_json(Path(path).read_text(encoding="utf-8"), f"voice bank {path}")

    def summary(self) -> dict[str, Any]:
        """What clients see: names and defaults, without the vectors."""
        return {"voices": self.voices, "emotions": self.emotions, "default_voice": self.default_voice,
                "default_emotion": self.default_emotion, **({"info": self.info} if self.info else {})}


def from_styles(styles: dict[tuple[str, str], np.ndarray], default_voice: str, default_emotion: str,
                info: dict[str, Any] | None = None) -> VoiceBank:
    """A bank from ``(voice, emotion) -> style vector``; voices and emotions keep first-seen order."""
    voices = list(dict.fromkeys(v for v, _ in styles))
    emotions = list(dict.fromkeys(e for _, e in styles))
    presets: dict[str, dict[str, list[float]]] = {v: {} for v in voices}
    for (voice, emotion), vector in styles.items():
        presets[voice][emotion] = [round(float(x), 6) for x in np.asarray(vector).ravel()]
    return VoiceBank(voices, emotions, default_voice, default_emotion, presets, info or {})
