"""The voice bank: named style presets (voice x emotion), each a style vector for the decoder.

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


@dataclass
class VoiceBank:
    voices: list[str]
    emotions: list[str]
    default_voice: str
    default_emotion: str
    #: voice -> emotion -> style vector
    presets: dict[str, dict[str, list[float]]]
    info: dict[str, Any] = field(default_factory=dict)

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

    def to_json(self) -> str:
        return json.dumps({"voices": self.voices, "emotions": self.emotions, "default_voice": self.default_voice,
                           "default_emotion": self.default_emotion, "presets": self.presets, "info": self.info})

    @classmethod
    def from_json(cls, text: str) -> VoiceBank:
        data = json.loads(text)
        return cls(data["voices"], data["emotions"], data["default_voice"], data["default_emotion"],
                   data["presets"], data.get("info", {}))

    def save(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> VoiceBank:
        return cls.from_json(Path(path).read_text())

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
