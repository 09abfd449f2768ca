"""What an ``instructions`` text asks of the voice, mapped onto the controls this model has.

OpenAI's ``instructions`` is free text ("Speak cheerfully and a bit slower"). This model has four controls:
an emotion preset of the voice bank, rate, pitch (semitones) and volume (dB) (``tts_triton.contract.CONTROLS``).
:data:`PHRASES` maps phrases to them; :func:`read_instructions` finds them in the text:

- lower-cased whole words (``high-pitched`` reads as ``high pitched``); for each control, the phrase that comes
  first in the text wins (the longer one when two start at the same word);
- a phrase right after a negation (``not``, ``no``, ``never``, ``don't``, ``without``...), or one degree word
  after it ("not too fast", "don't be loud"), is skipped;
- an emotion's own name (``sad``) counts as well as the synonyms of the table, and a phrase naming an emotion the
  server's voice bank lacks is skipped;
- the rate multiplies the request's ``speed``; pitch and volume are sent as the model's PITCH and VOLUME.

What it cannot do, so such text is ignored: accents, characters and personas ("talk like a pirate"), a whispered
or breathy timbre (a whisper is only quieter here), singing, laughing, emphasis on a given word, a pause at a
given place (SSML ``<break>``), a pronunciation (SSML ``<phoneme>``), age or gender (pick a ``voice``), degrees
beyond the table ("a little", "extremely" change nothing but ``very`` where listed).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace

__all__ = ["PHRASES", "Directions", "read_instructions"]

_SLOW, _VERY_SLOW, _FAST, _VERY_FAST = 0.85, 0.7, 1.2, 1.4
#: Semitones for "high" / "low" voice: clearly audible, well inside the model's +-12 and its formant-keeping range.
_HIGH = 3.0
#: dB: "quiet" is about half as loud; a whisper, without its timbre, is what is left: much quieter.
_QUIET, _WHISPER, _LOUD, _SHOUT = -6.0, -15.0, 4.0, 8.0


def _table(control: str, value: float | str, *phrases: str) -> dict[tuple[str, ...], tuple[str, float | str]]:
    return {tuple(p.split()): (control, value) for p in phrases}


#: Phrase (words) -> (control, value): ``emotion`` names a preset; ``speed`` is a rate factor; ``pitch`` semitones;
#: ``volume`` dB.
PHRASES: dict[tuple[str, ...], tuple[str, float | str]] = {
    **_table("emotion", "happy", "cheerful", "cheerfully", "joyful", "joyfully", "excited", "excitedly", "upbeat",
             "glad", "happily", "enthusiastic", "enthusiastically", "delighted"),
    **_table("emotion", "sad", "sorrowful", "melancholy", "gloomy", "unhappy", "somber", "sadly", "mournful",
             "mournfully", "tearful", "tearfully", "depressed"),
    **_table("emotion", "angry", "furious", "furiously", "annoyed", "irritated", "mad", "angrily", "enraged"),
    **_table("emotion", "surprised", "amazed", "astonished", "shocked", "in surprise", "surprise"),
    **_table("emotion", "neutral", "calm", "calmly", "flat", "plain", "monotone", "matter of fact"),
    **_table("speed", _VERY_SLOW, "very slowly", "very slow"),
    **_table("speed", _SLOW, "slowly", "slow", "slower", "unhurried", "leisurely", "deliberately"),
    **_table("speed", _FAST, "quickly", "quick", "fast", "faster", "rapidly", "briskly", "hurried", "hurriedly"),
    **_table("speed", _VERY_FAST, "very quickly", "very fast"),
    **_table("pitch", _HIGH, "high pitched", "higher pitched", "high pitch", "higher pitch", "high voice",
             "higher voice", "squeaky"),
    **_table("pitch", -_HIGH, "low pitched", "lower pitched", "low pitch", "lower pitch", "low voice", "lower voice",
             "deep voice", "deeper voice", "deep", "deeper"),
    **_table("volume", _WHISPER, "whisper", "whispering", "whispered", "whispers"),
    **_table("volume", _QUIET, "quietly", "quiet", "softly", "soft", "hushed", "gently", "quieter", "softer"),
    **_table("volume", _LOUD, "loud", "loudly", "louder"),
    **_table("volume", _SHOUT, "shout", "shouting", "shouted", "yell", "yelling", "booming"),
}
_NEGATIONS = frozenset({"not", "no", "never", "don't", "dont", "without", "nor", "isn't", "shouldn't"})
_DEGREES = frozenset({"too", "so", "very", "overly", "that", "be", "sound", "all"})
_LONGEST = max(len(p) for p in PHRASES)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class Directions:
    """The controls an ``instructions`` text sets; the defaults change nothing. ``phrases``: what set them."""

    emotion: str | None = None
    speed: float = 1.0
    pitch: float = 0.0
    volume: float = 0.0
    phrases: tuple[str, ...] = ()


def read_instructions(text: str | None, emotions: Collection[str]) -> Directions:
    """The :class:`Directions` of ``text`` for a voice bank with ``emotions`` (module docstring for the rules)."""
    words = _WORD.findall((text or "").lower())
    found = Directions()
    done: set[str] = set()
    for i in range(len(words)):
        if _negated(words, i):
            continue
        for size in range(min(_LONGEST, len(words) - i), 0, -1):
            phrase = tuple(words[i:i + size])
            control, value = PHRASES.get(phrase, ("emotion", phrase[0]) if size == 1 else (None, None))
            if control is None or control in done or (control == "emotion" and value not in emotions):
                continue
            done.add(control)
            found = replace(found, **{control: value}, phrases=(*found.phrases, " ".join(phrase)))
            break
    return found


def _negated(words: list[str], i: int) -> bool:
    before = words[max(0, i - 2):i]
    return bool(before) and (before[-1] in _NEGATIONS or (len(before) == 2 and before[0] in _NEGATIONS
                                                          and before[1] in _DEGREES))
