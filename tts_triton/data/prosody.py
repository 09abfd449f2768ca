"""Voices and emotions of the corpus, as settings of the teachers, and the renderer that applies them.

A voice is a teacher (:data:`ESPEAK_NG` or :data:`FLITE`) and one of its speakers: an espeak-ng English voice
variant, or a flite voice driven with espeak-ng's pronunciations (:mod:`tts_triton.data.cmu`), so that every
voice says the phonemes the front end writes down. An emotion is four prosody settings, in espeak-ng's units:

==========  ==========================================================================================
pitch       ``espeak-ng -p`` (0-99, 50 = the variant's own base pitch): mean F0 rises with it.
range       ``<prosody range="N%">`` in SSML (``-m``), 100 = the variant's own intonation range.
rate        ``espeak-ng -s`` in words per minute (espeak's default is 175).
amplitude   loudness on espeak's ``-a`` scale (100 = default). It is applied as a gain after synthesis
            (each utterance is peak-normalised to ``PEAK_AT_DEFAULT * amplitude / 100``), which is what
            ``-a`` does inside espeak-ng except that a gain above 100 there clips.
==========  ==========================================================================================

flite takes them through its own controls (:func:`flite_features`): the pitch as a mean F0 target
(``int_f0_target_mean``, :data:`SEMITONES_PER_PITCH_STEP` per espeak-ng step from the voice's neutral F0), the
range as the F0 spread target (``int_f0_target_stddev``, scaled from the voice's neutral spread), the rate as
``duration_stretch`` (neutral rate / rate); the amplitude as the same gain.

festival's HTS voice (``slt``: :mod:`tts_triton.data.festival`, the same ARCTIC speaker, the most natural teacher the
licences allow) takes them through the HTS engine's own controls (:func:`hts_controls`): a share of the pitch offset
as half-tones added to the model's log F0 (:data:`HTS_PITCH_SHARE`: the judges mark a raised HTS voice down), the
range as the weight of log F0's global variance, the rate as the engine's speed; the amplitude as the same gain. So
its emotions keep the voice's own timbre, contour and vocoder, where flite's would bring flite's.

A voice may also be rendered at the pitch offsets of ``Voice.pitch_variants`` (its neutral speech, by its own
teacher's pitch control): the model learns pitch as a direction of its style space from them
(:meth:`tts_triton.core.voices.VoiceBank.style`).

The tables are data used by corpus generation and by evaluation alike: the mean F0 of rendered (and
synthesized) speech orders the emotions as :data:`PITCH_ORDER` does, for every voice;
``python -m tts_triton.data.prosody`` measures it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from xml.sax.saxutils import escape

import numpy as np

from tts_triton.core import audio
from tts_triton.core.voices import NATURAL_MALE
from tts_triton.data import cmu, espeak, festival, flite
from tts_triton.data.sentences import generate

ESPEAK_NG = "espeak-ng"
FLITE = "flite"
FESTIVAL = festival.FESTIVAL


@dataclass(frozen=True)
class Voice:
    """A speaker of a ``teacher``: ``speaker`` is its voice name (espeak-ng: language + variant; flite: a
    voice of ``flite -lv``; festival: an HTS voice). ``weight``: the voice's share of train and validation
    utterances relative to weight 1, per (emotion or pitch variant) pair (:func:`tts_triton.data.corpus.plan`).
    ``f0_hz``, ``f0_sd_hz``: flite's neutral mean F0 and spread targets (measured on its own renderings; unused for
    the others). ``pitch_variants``: semitone offsets at which its neutral speech is also rendered (festival's
    voices only: the HTS engine moves F0 and keeps the timbre)."""

    name: str
    teacher: str
    speaker: str
    gender: str
    weight: int = 1
    f0_hz: float = 0.0
    f0_sd_hz: float = 0.0
    pitch_variants: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.pitch_variants and self.teacher != FESTIVAL:
            raise ValueError(f"voice {self.name}: pitch variants need festival's HTS engine, not {self.teacher}")

    @property
    def teacher_name(self) -> str:
        """The teacher as a report names it: ``festival cmu_us_slt_arctic_hts``."""
        return f"{self.teacher} {self.speaker}"


@dataclass(frozen=True)
class Emotion:
    """Prosody settings (see the module docstring for units)."""

    name: str
    pitch: int
    range: int
    rate: int
    amplitude: int


#: Every corpus voice. espeak-ng's come first, so that their positions (the dataset's voice_index) stay.
CORPUS_VOICES: dict[str, Voice] = {
    v.name: v
    for v in (
        Voice("m1", ESPEAK_NG, "en-us+m1", "male"),
        Voice("m2", ESPEAK_NG, "en-us+m2", "male"),
        Voice("m3", ESPEAK_NG, "en-us+m3", "male"),
        Voice("m7", ESPEAK_NG, "en-us+m7", "male"),
        Voice("m8", ESPEAK_NG, "en-us+m8", "male"),
        Voice("f1", ESPEAK_NG, "en-us+f1", "female"),
        Voice("f2", ESPEAK_NG, "en-us+f2", "female"),
        Voice("f3", ESPEAK_NG, "en-us+f3", "female"),
        Voice("f4", ESPEAK_NG, "en-us+f4", "female"),
        Voice("f5", ESPEAK_NG, "en-us+f5", "female"),
        # weight 5 per emotion (a third of the plan, as before) and per pitch variant
        Voice("slt", FESTIVAL, festival.HTS_SLT, "female", weight=5, pitch_variants=(-4.0, 4.0)),
        # flite's defaults for kal16 (its renderings are identical with and without these targets)
        Voice(NATURAL_MALE, FLITE, "kal16", "male", weight=3, f0_hz=95.0, f0_sd_hz=11.0),
    )
}
#: The espeak-ng voices: those of a checkpoint that records no voices of its own (`Checkpoint.voices`).
VOICES: dict[str, Voice] = {name: v for name, v in CORPUS_VOICES.items() if v.teacher == ESPEAK_NG}

EMOTIONS: dict[str, Emotion] = {
    e.name: e
    for e in (
        Emotion("neutral", pitch=45, range=100, rate=165, amplitude=100),
        Emotion("happy", pitch=70, range=160, rate=185, amplitude=120),
        Emotion("sad", pitch=25, range=40, rate=130, amplitude=70),
        Emotion("angry", pitch=58, range=140, rate=195, amplitude=170),
        Emotion("surprised", pitch=85, range=200, rate=170, amplitude=130),
    )
}

#: Emotions from lowest to highest mean F0: the order the rendered audio must show for every voice.
PITCH_ORDER: tuple[str, ...] = tuple(sorted(EMOTIONS, key=lambda name: EMOTIONS[name].pitch))

#: Peak level of an utterance at amplitude 100; amplitude 170 (angry) peaks at 0.85.
PEAK_AT_DEFAULT = 0.5
#: Silence trimming: frames quieter than this (dB below the loudest frame) are silence...
TRIM_DB = 40.0
#: ...and this much of it is kept before the first and after the last loud frame.
TRIM_MARGIN_S = 0.05


#: Semitones of mean F0 per step of espeak-ng's pitch (measured on the espeak-ng renderings, table in
#: docs/corpus.md: sad -4.5, angry +3.0, happy +5.3, surprised +8.5 st at -20, +13, +25, +40 steps).
SEMITONES_PER_PITCH_STEP = 0.22
NEUTRAL = "neutral"
#: The share of an emotion's pitch offset (espeak-ng's steps x :data:`SEMITONES_PER_PITCH_STEP`) that an HTS voice
#: takes: happy +3.0, sad -2.4, angry +1.6, surprised +4.8 st. The judges mark a raised HTS voice down (slt's own
#: audio: DistillMOS 3.51 neutral, 3.13 at +4 st, 3.12 surprised at +5.7 st), and a bit over half the offset keeps
#: every emotion's F0 more than 10 % from neutral's.
HTS_PITCH_SHARE = 0.55
#: The share of an emotion's range change (``range`` / neutral's) given to the HTS engine's global-variance weight of
#: log F0 (surprised 1.6, happy 1.36, angry 1.24), never below :data:`HTS_GV_FLOOR`: a flattened contour drones
#: (sad at weight 0.6: DistillMOS 3.02 against 3.24 at 1, on slt's own audio).
HTS_RANGE_SHARE = 0.6
HTS_GV_FLOOR = 0.85


def espeak_args(voice: Voice, emotion: Emotion) -> list[str]:
    """espeak-ng options for ``voice`` speaking SSML (from :func:`ssml`) with ``emotion``."""
    return ["-v", voice.speaker, "-p", str(emotion.pitch), "-s", str(emotion.rate), "-m"]


def flite_features(voice: Voice, emotion: Emotion) -> dict[str, float]:
    """flite's ``--setf`` features for ``voice`` speaking with ``emotion`` (see the module docstring)."""
    neutral = EMOTIONS[NEUTRAL]
    steps = emotion.pitch - neutral.pitch
    return {
        "int_f0_target_mean": voice.f0_hz * 2.0 ** (SEMITONES_PER_PITCH_STEP * steps / 12.0),
        "int_f0_target_stddev": voice.f0_sd_hz * emotion.range / neutral.range,
        "duration_stretch": neutral.rate / emotion.rate,
    }


def hts_controls(emotion: Emotion, semitones: float = 0.0) -> festival.HtsControls:
    """The HTS engine's controls for ``emotion``, ``semitones`` higher (see the module docstring)."""
    neutral = EMOTIONS[NEUTRAL]
    return festival.HtsControls(
        half_tones=semitones + HTS_PITCH_SHARE * SEMITONES_PER_PITCH_STEP * (emotion.pitch - neutral.pitch),
        f0_gv_weight=max(HTS_GV_FLOOR, 1.0 + HTS_RANGE_SHARE * (emotion.range / neutral.range - 1.0)),
        speed=emotion.rate / neutral.rate,
    )


def ssml(text: str, emotion: Emotion) -> str:
    """``text`` (XML-escaped) wrapped in the SSML that sets the emotion's pitch range."""
    return f'<speak><prosody range="{emotion.range}%">{escape(text)}</prosody></speak>'


def trim_silence(samples: np.ndarray) -> np.ndarray:
    """Cut silence at both ends down to :data:`TRIM_MARGIN_S`; the result is a multiple of HOP_LENGTH long.

    A lead shorter than the margin is padded with zeros. Silence is every ``HOP_LENGTH`` block whose RMS
    is :data:`TRIM_DB` below the loudest block's.
    """
    hop = audio.HOP_LENGTH
    x = np.asarray(samples, dtype=np.float32)
    blocks = x[: len(x) // hop * hop].reshape(-1, hop)
    if blocks.size == 0:
        raise ValueError("audio shorter than one hop")
    rms = np.sqrt(np.mean(blocks**2, axis=1))
    loud = np.flatnonzero(rms > rms.max() * 10 ** (-TRIM_DB / 20))
    margin = int(TRIM_MARGIN_S * audio.SAMPLE_RATE)
    start = loud[0] * hop - margin  # negative: speech began within the margin; pad with zeros
    stop = min(len(x), (loud[-1] + 1) * hop + margin)
    stop = start + (stop - start) // hop * hop
    return np.concatenate([np.zeros(max(0, -start), samples.dtype), samples[max(0, start) : stop]])


@dataclass(frozen=True)
class Rendering:
    """A teacher's utterance: float32 ``audio`` at SAMPLE_RATE and ``agreement``, the fraction of the front
    end's phonemes the teacher said (:func:`tts_triton.data.cmu.agreement`; None for espeak-ng, whose
    phonemes the front end's are)."""

    audio: np.ndarray
    agreement: float | None


def render(text: str, voice: Voice, emotion: Emotion, semitones: float = 0.0) -> np.ndarray:
    """Speak ``text`` with ``voice`` and ``emotion``: float32 mono at SAMPLE_RATE (:func:`rendering`)."""
    return rendering(text, voice, emotion, semitones=semitones).audio


def rendering(text: str, voice: Voice, emotion: Emotion, drive: bool = True, semitones: float = 0.0) -> Rendering:
    """Speak ``text`` with ``voice`` and ``emotion`` with the voice's teacher, ``semitones`` higher (festival's
    voices only: any other teacher raises ValueError for a nonzero value).

    Silence is trimmed (:func:`trim_silence`) and the peak is ``PEAK_AT_DEFAULT * amplitude / 100``. flite and
    festival speak espeak-ng's pronunciations (:func:`tts_triton.data.cmu.addenda`) unless ``drive`` is False
    (then their own lexicon's, for comparison). Raises :class:`espeak.EspeakError`, :class:`flite.FliteError` or
    :class:`festival.FestivalError`.
    """
    teacher = voice.teacher
    if semitones and teacher != FESTIVAL:
        raise ValueError(f"voice {voice.name}: {teacher} renders no pitch offset ({semitones:+g} st asked)")
    if teacher == ESPEAK_NG:
        rate, samples = espeak.synthesize(ssml(text, emotion), espeak_args(voice, emotion))
        if rate != audio.SAMPLE_RATE:
            raise espeak.EspeakError(f"espeak-ng voice {voice.speaker} speaks at {rate} Hz, "
                                     f"expected {audio.SAMPLE_RATE}")
        x, agreement = samples.astype(np.float32) / 32768.0, None
    elif teacher == FLITE:
        x, agreement = _flite(text, voice, emotion, drive)
    elif teacher == FESTIVAL:
        x, agreement = _festival(text, voice.speaker, hts_controls(emotion, semitones), drive)
    else:
        raise ValueError(f"voice {voice.name}: unknown teacher {teacher!r}")
    x = trim_silence(x)
    peak = float(np.abs(x).max())
    if peak == 0.0:
        raise RuntimeError(f"{voice.teacher} voice {voice.speaker} rendered silence for {text!r}")
    return Rendering((x * (PEAK_AT_DEFAULT * emotion.amplitude / 100.0 / peak)).astype(np.float32), agreement)


def _driven(text: str, drive: bool) -> tuple[str, dict[str, list[str]], list[str]]:
    """``text`` as a CMU-lexicon teacher reads it (normalized), the addendum that makes it say the front end's
    phonemes (empty unless ``drive``) and the segments it should then say."""
    from tts_triton.core.symbols import SYMBOLS
    from tts_triton.text.frontend import normalize, plan_plain

    words = [(w.text, "".join(SYMBOLS[i] for i in s.ids[w.first : w.last]))
             for s in plan_plain(text) for w in s.words]
    lexicon, _ = cmu.addenda(words) if drive else ({}, 0)
    expected = cmu.surface(p for word, symbols in words for p in cmu.to_cmu(symbols, word))
    return normalize(text), lexicon, expected


def _flite(text: str, voice: Voice, emotion: Emotion, drive: bool) -> tuple[np.ndarray, float]:
    """flite's rendering at SAMPLE_RATE and its agreement with the front end's phonemes of ``text``."""
    normalized, lexicon, expected = _driven(text, drive)
    said = flite.synthesize(normalized, voice.speaker, flite_features(voice, emotion), lexicon)
    x = flite.resample(said.samples.astype(np.float32) / 32768.0, said.rate, audio.SAMPLE_RATE)
    return x, cmu.agreement(expected, said.segments)


def _festival(text: str, speaker: str, controls: festival.HtsControls, drive: bool) -> tuple[np.ndarray, float]:
    """festival's HTS rendering at SAMPLE_RATE under ``controls`` and its agreement with the front end's phonemes of
    ``text``."""
    normalized, lexicon, expected = _driven(text, drive)
    said = festival.synthesize(normalized, speaker, controls, lexicon)
    x = flite.resample(said.samples.astype(np.float32) / 32768.0, said.rate, audio.SAMPLE_RATE)
    return x, cmu.agreement(expected, said.segments)


def check_voices(voices: Sequence[str] = tuple(CORPUS_VOICES)) -> None:
    """Raise :class:`espeak.EspeakError`, :class:`flite.FliteError` or :class:`festival.FestivalError` unless each
    teacher of ``voices`` is installed."""
    chosen = [CORPUS_VOICES[name] for name in voices]
    if any(v.teacher == ESPEAK_NG for v in chosen):
        missing = sorted(v.name for v in chosen
                         if v.teacher == ESPEAK_NG and v.speaker.partition("+")[2] not in espeak.variants())
        if missing:
            raise espeak.EspeakError(f"espeak-ng lacks the voice variants {missing}")
    if any(v.teacher == FLITE for v in chosen):
        missing = sorted(v.name for v in chosen if v.teacher == FLITE and v.speaker not in flite.voices())
        if missing:
            raise flite.FliteError(f"flite lacks the voices {missing}")
    if any(v.teacher == FESTIVAL for v in chosen):
        festival.hts_engine_binary()
        missing = sorted(v.name for v in chosen if v.teacher == FESTIVAL and v.speaker not in festival.voices())
        if missing:
            raise festival.FestivalError(f"festival lacks the voices of {missing}")


def f0_contour(samples: np.ndarray) -> np.ndarray:
    """F0 in Hz every 5 ms, 0 where unvoiced (WORLD DIO + StoneMask; needs ``pyworld``)."""
    import pyworld

    x = np.asarray(samples, dtype=np.float64)
    f0, times = pyworld.dio(x, audio.SAMPLE_RATE, f0_floor=50.0, f0_ceil=800.0, frame_period=5.0)
    return pyworld.stonemask(x, f0, times, audio.SAMPLE_RATE)


@dataclass(frozen=True)
class Measurement:
    """Prosody of a set of utterances: mean F0 (Hz, over voiced frames), log-F0 spread (semitones),
    seconds per utterance and RMS level (dBFS)."""

    f0_hz: float
    f0_sd_semitones: float
    seconds: float
    rms_db: float


def measure(clips: Sequence[np.ndarray]) -> Measurement:
    """:class:`Measurement` over ``clips`` (float audio at SAMPLE_RATE)."""
    f0 = np.concatenate([f0_contour(c) for c in clips])
    voiced = f0[f0 > 0]
    log_f0 = 12.0 * np.log2(voiced)
    power = np.mean(np.concatenate(clips).astype(np.float64) ** 2)
    return Measurement(
        f0_hz=float(np.mean(voiced)),
        f0_sd_semitones=float(np.std(log_f0)),
        seconds=float(np.mean([len(c) for c in clips]) / audio.SAMPLE_RATE),
        rms_db=float(10 * np.log10(power)),
    )


def measure_table(texts: Sequence[str], jobs: int = 4,
                  voices: Sequence[str] = tuple(CORPUS_VOICES)) -> dict[tuple[str, str], Measurement]:
    """Render every text with every (voice, emotion) of ``voices`` and measure each pair."""
    pairs = [(CORPUS_VOICES[v], e) for v in voices for e in EMOTIONS.values()]
    with ThreadPoolExecutor(jobs) as pool:  # espeak-ng runs in subprocesses; pyworld releases little, so keep it small
        clips = list(pool.map(lambda pair: [render(t, *pair) for t in texts], pairs))
    return {(v.name, e.name): measure(c) for (v, e), c in zip(pairs, clips, strict=True)}


def order_violations(table: dict[tuple[str, str], Measurement]) -> list[str]:
    """Voices whose mean F0 does not rise along :data:`PITCH_ORDER`, with their F0s."""
    bad = []
    for voice in _voices(table):
        f0 = [table[voice, e].f0_hz for e in PITCH_ORDER]
        if any(a >= b for a, b in itertools.pairwise(f0)):
            bad.append(f"{voice}: " + ", ".join(f"{e} {f:.0f}" for e, f in zip(PITCH_ORDER, f0, strict=True)))
    return bad


def markdown(table: dict[tuple[str, str], Measurement]) -> str:
    """The measurements as Markdown: mean F0 per voice x emotion, then per-emotion averages."""
    lines = ["| voice | " + " | ".join(PITCH_ORDER) + " |", "|---" * (len(PITCH_ORDER) + 1) + "|"]
    voices = _voices(table)
    for voice in voices:
        lines.append(f"| {voice} ({CORPUS_VOICES[voice].gender}) | " + " | ".join(
            f"{table[voice, e].f0_hz:.0f}" for e in PITCH_ORDER) + " |")
    lines += ["", "| emotion | -p | range % | -s wpm | amplitude | F0 vs neutral (st) | F0 sd (st) "
              "| s / utterance | RMS dBFS |", "|---" * 9 + "|"]
    for name in PITCH_ORDER:
        e = EMOTIONS[name]
        rel = np.mean([12 * np.log2(table[v, name].f0_hz / table[v, "neutral"].f0_hz) for v in voices])
        sd = np.mean([table[v, name].f0_sd_semitones for v in voices])
        sec = np.mean([table[v, name].seconds for v in voices])
        rms = np.mean([table[v, name].rms_db for v in voices])
        lines.append(f"| {name} | {e.pitch} | {e.range} | {e.rate} | {e.amplitude} | {rel:+.1f} | {sd:.1f} "
                     f"| {sec:.2f} | {rms:.1f} |")
    return "\n".join(lines)


def _voices(table: dict[tuple[str, str], Measurement]) -> list[str]:
    return list(dict.fromkeys(voice for voice, _ in table))


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the prosody table on test sentences; exit 1 when some voice breaks the pitch order."""

    parser = argparse.ArgumentParser(prog="python -m tts_triton.data.prosody", description=main.__doc__)
    parser.add_argument("--sentences", type=int, default=20, help="test sentences per voice x emotion")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--voices", default=",".join(CORPUS_VOICES), help="comma-separated subset of the voices")
    args = parser.parse_args(argv)
    texts = [s.text for s in generate() if s.split == "test"][: args.sentences]
    voices = args.voices.split(",")
    unknown = sorted(set(voices) - set(CORPUS_VOICES))
    if unknown:
        parser.error(f"unknown voices {unknown}; known: {', '.join(CORPUS_VOICES)}")
    check_voices(voices)
    table = measure_table(texts, args.jobs, voices)
    print(markdown(table))
    bad = order_violations(table)
    print("pitch order " + " < ".join(PITCH_ORDER) + (": violated by\n  " + "\n  ".join(bad) if bad else ": holds"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
