"""OpenAI voice names -> the server's preset voices.

A request's ``voice`` is first looked up among the server's own voices (``f1``, ``m3``...); an OpenAI
name is then mapped through :data:`OPENAI_VOICES`, each to a list of presets of which the first the server has
wins (override entries with ``tts-triton gateway --voice-map FILE``, a JSON object of name -> preset or list of
presets). ``alloy``, the name OpenAI's examples use, and OpenAI's female voices map to
:data:`SERVER_DEFAULT`: the server's default voice, whichever its voice bank names (the shipped bank's is ``slt``,
its natural voice, taught by flite and festival; the espeak-ng-taught ``f1``-``f5`` keep their own names). OpenAI's
male voices map to ``m8``, the most natural male of the shipped bank (DistillMOS 3.25 served, against 2.85 for
``m1``, 2.84 for ``m2`` and 1.93 for flite-taught ``kal16``, on 30 held-out sentences:
docs/records/eval/candidate13-naturalness-m8.md); the other males keep their own names. When the bank
has none of a name's presets, the default voice answers, so the table keeps working with any voice bank; any other
name is a 400 naming ``voice``.
(``instructions``: :mod:`.instructions`.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tts_triton.client import VoiceCatalog

from .errors import ApiError

__all__ = ["OPENAI_VOICES", "SERVER_DEFAULT", "VoiceMap", "load_voice_map"]

#: The map's value for "the server's default voice" (its voice bank's ``default_voice``); no preset is named so.
SERVER_DEFAULT = "default"
#: The shipped bank's most natural male voice, which OpenAI's male names reach.
NATURAL_MALE = "m8"
#: OpenAI's voices -> presets in order of preference: the natural default for the female names, the natural male
#: for the male ones.
OPENAI_VOICES: dict[str, tuple[str, ...]] = {
    **{name: (SERVER_DEFAULT,) for name in ("alloy", "coral", "nova", "sage", "shimmer", "marin")},
    **{name: (NATURAL_MALE,) for name in ("ash", "ballad", "cedar", "echo", "fable", "onyx", "verse")},
}


class VoiceMap:
    """Resolves a request's ``voice`` against one voice bank."""

    def __init__(self, openai_voices: Mapping[str, str | tuple[str, ...]] = OPENAI_VOICES) -> None:
        self.openai_voices = {name: (presets,) if isinstance(presets, str) else tuple(presets)
                              for name, presets in openai_voices.items()}

    def voice(self, name: str, bank: VoiceCatalog) -> str:
        """The preset for ``name``; raises a 400 naming ``voice`` for a name neither native nor mapped."""
        if name in bank.voices:
            return name
        mapped = self.openai_voices.get(name.lower())
        if mapped is None:
            known = ", ".join([*bank.voices, *sorted(self.openai_voices)])
            raise ApiError(400, f"voice {name!r} is unknown; available voices: {known}", param="voice")
        return next((preset for preset in mapped if preset in bank.voices), bank.default_voice)

    def table(self, bank: VoiceCatalog) -> dict[str, str]:
        """Every OpenAI name with the preset it resolves to on ``bank``."""
        return {name: self.voice(name, bank) for name in sorted(self.openai_voices)}


def load_voice_map(path: Path | None) -> VoiceMap:
    """The default map, with a JSON file's ``{"openai name": "preset" or ["preset", ...]}`` entries over it."""
    if path is None:
        return VoiceMap()
    entries = json.loads(path.read_text())
    def presets(value: object) -> bool:
        return isinstance(value, str) or (isinstance(value, list) and bool(value)
                                          and all(isinstance(v, str) for v in value))

    if not isinstance(entries, dict) or not all(presets(v) for v in entries.values()):
        raise ValueError(f"{path}: expected a JSON object of voice name -> preset name or list of preset names")
    return VoiceMap({**OPENAI_VOICES, **{k.lower(): v for k, v in entries.items()}})
