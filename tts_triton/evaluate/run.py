"""One evaluation run: synthesize the test sentences, render the teachers' references (features cached), measure,
and write the report beside ``--out`` (see :mod:`tts_triton.evaluate`)."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core import audio, contract
from tts_triton.core.paths import cache_dir
from tts_triton.data import espeak, festival, flite
from tts_triton.data.prosody import (
    CORPUS_VOICES,
    EMOTIONS,
    ESPEAK_NG,
    FESTIVAL,
    FLITE,
    Emotion,
    Voice,
    hts_controls,
    render,
)
from tts_triton.evaluate.asr import band_limit, teacher_band
from tts_triton.evaluate.figures import write_plots, write_samples
from tts_triton.evaluate.measures import (
    FEATURE_SETTINGS,
    EmotionF0,
    Features,
    Item,
    emotion_items,
    emotion_means,
    emotion_order,
    features,
    identity_correct,
    mcd,
    percent,
    process_pool,
    run_groups,
    run_parallel,
    select_items,
)
from tts_triton.evaluate.synthesis import Clip, RecordingBackend, copy_synthesis, synthesize
from tts_triton.jobs.progress import ProgressLine

DEFAULT_OUT = Path("docs/evaluation.md")
#: espeak-ng's own defaults (``-p 50 -s 175``, full range, default amplitude) for the sanity checks.
ESPEAK_DEFAULT = Emotion("espeak-default", pitch=50, range=100, rate=175, amplitude=100)
EN_US = Voice("en-us", ESPEAK_NG, "en-us", "male")
#: Sanity checks of the MCD implementation: (label, other rendering, the published value for scale).
SANITY: tuple[tuple[str, Voice, Emotion, float | None], ...] = (
    ("en-us at 130 wpm (rate only)", EN_US, replace(ESPEAK_DEFAULT, rate=130), 2.3),
    ("en-us+m3 (another male variant)", Voice("en-us+m3", ESPEAK_NG, "en-us+m3", "male"), ESPEAK_DEFAULT, 4.5),
    *((f"en-us+f{i} (female)", Voice(f"en-us+f{i}", ESPEAK_NG, f"en-us+f{i}", "female"), ESPEAK_DEFAULT, None)
      for i in range(1, 6)),
)
#: The published male-vs-female value, compared with the mean over the five female rows.
SANITY_MALE_FEMALE_DB = 11.6
SANITY_SENTENCES = 5


def min_sentences(voices: Collection[str]) -> int:
    """Test sentences that say every one of ``voices`` x emotion once (:func:`select_items`)."""
    return len(voices) * len(EMOTIONS)


def narrower(*bands: int | None) -> int | None:
    """The narrowest of the bands (a teacher's rate, :func:`asr.teacher_band`; None: the whole band)."""
    return min((b for b in bands if b is not None), default=None)


def default_cache() -> Path:
    """The cache of espeak-ng features, under :func:`~tts_triton.core.paths.cache_dir` (read at the call)."""
    return cache_dir() / "eval-features"


@dataclass(frozen=True)
class Reference:
    """One teacher's rendering: ``text`` in ``voice`` with ``emotion`` (see :func:`prosody.render`), its features
    taken in ``band`` (:func:`asr.band_limit`; None: as rendered)."""

    text: str
    voice: Voice
    emotion: Emotion
    band: int | None = None

    def key(self, versions: Mapping[str, str]) -> str:
        """The cache key: text, voice, prosody, the teacher's version and the feature settings (and band)."""
        e, v = self.emotion, self.voice
        fields: tuple[Any, ...] = (versions[v.teacher], v.speaker, e.pitch, e.range, e.rate, e.amplitude, self.text,
                                   FEATURE_SETTINGS)
        if v.teacher != ESPEAK_NG:  # espeak-ng's keys predate the other teachers
            fields += (v.teacher, v.f0_hz, v.f0_sd_hz)
        if v.teacher == FESTIVAL:  # the HTS engine's controls of the emotion
            fields += (hts_controls(e),)
        if self.band is not None:
            fields += (("band", self.band),)
        return hashlib.sha256(repr(fields).encode()).hexdigest()[:32]

    def in_band(self, band: int | None) -> Reference:
        """This rendering with its features taken in ``band``; band None when the teacher speaks no wider."""
        own = teacher_band(self.voice.name, self.emotion.name) if self.voice.name in CORPUS_VOICES else None
        return replace(self, band=band if band is not None and (own is None or band < own) else None)


def teacher_versions(teachers: Collection[str]) -> dict[str, str]:
    """The version string of each of ``teachers`` (espeak-ng, flite), for the cache keys."""
    readers = {ESPEAK_NG: espeak.espeak_version, FLITE: flite.flite_version, FESTIVAL: festival.festival_version}
    return {t: readers[t]() for t in teachers}


def band_features(samples: np.ndarray, band: int | None) -> Features:
    """:func:`features` of ``samples`` (float, SAMPLE_RATE) without what lies above ``band / 2``."""
    return features(band_limit(samples, band))


def reference_features(ref: Reference, cache: Path, versions: Mapping[str, str]) -> Features:
    """:func:`band_features` of ``ref``'s rendering, read from or written to ``cache``."""
    path = cache / f"{ref.key(versions)}.npz"
    if path.exists():
        with np.load(path) as data:
            return Features(data["mcep"], data["f0"], data["loud"])
    result = band_features(render(ref.text, ref.voice, ref.emotion), ref.band)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.npz")
    np.savez(tmp, mcep=result.mcep, f0=result.f0, loud=result.loud)
    tmp.replace(path)
    return result


def _mcds(sources: Sequence[np.ndarray], pairs: Sequence[tuple[int, np.ndarray]]) -> list[float]:
    """MCD-DTW of each ``(k, other)``: ``sources[k]`` against ``other``."""
    return [mcd(sources[k], other) for k, other in pairs]


@dataclass
class ScoredUtterance:
    item: Item
    seconds: float
    hit_max_steps: bool
    mcds: dict[str, float]  # voice -> MCD against that voice's rendering (same sentence and emotion)
    #: MCD from the target voice's rendering to the nearest other voice's: how near the teachers' voices are
    teacher_gap: float

    @property
    def nearest(self) -> str:
        return min(self.mcds, key=self.mcds.__getitem__)

    @property
    def identity_ok(self) -> bool:
        return identity_correct(self.mcds, self.item.voice)


@dataclass
class Evaluation:
    """Everything the report shows."""

    command: str
    checkpoint: str
    trained: bool
    fingerprint: str
    info: dict[str, Any]
    voice_bank: str
    #: the voices synthesized (``--voices``), those an output's identity is decided among, the bank's default
    voices: list[str]
    identity_voices: list[str]
    default_voice: str
    utterances: list[ScoredUtterance]
    #: "synthesized", "vocoder copy" and "teacher" -> voice -> emotion -> mean F0 of the emotion sentences
    emotion_f0: dict[str, EmotionF0]
    copy_mcd: list[float]  # vocoder copy-synthesis vs the teacher's rendering, one per emotion sentence
    sanity: dict[str, list[float]]  # label -> MCD per sentence (loud frames, as everywhere)
    sanity_all_frames: dict[str, list[float]]  # the same with every frame kept
    timings: dict[str, float]
    plots: dict[str, str]
    samples: list[tuple[str, Item, float]]

    def of_voice(self, voice: str) -> list[ScoredUtterance]:
        return [u for u in self.utterances if u.item.voice == voice]

    @property
    def median_mcd(self) -> float:
        return float(np.median([u.mcds[u.item.voice] for u in self.utterances]))

    @property
    def identity_pct(self) -> float:
        return 100.0 * float(np.mean([u.identity_ok for u in self.utterances]))

    @property
    def stop_failures(self) -> int:
        return sum(u.hit_max_steps for u in self.utterances)

    @property
    def stop_failure_pct(self) -> float:
        return 100.0 * self.stop_failures / len(self.utterances)

    @property
    def emotion_pct(self) -> float:
        return percent(emotion_order(self.emotion_f0["synthesized"]))


@contextmanager
def timed(timings: dict[str, float], label: str) -> Iterator[None]:
    """Record the block's wall-clock seconds as ``timings[label]``."""
    start = time.monotonic()
    yield
    timings[label] = time.monotonic() - start


@dataclass
class EvaluationPlan:
    """What an evaluation synthesizes and renders: ``items`` (MCD, identity, stops), ``by_emotion`` (F0 order and
    copy-synthesis), each item's rendering in every one of ``identity_voices`` and the sanity renderings.

    Every distance between two clips is taken in the narrower band of the two (:func:`asr.teacher_band`: flite
    speaks at 16 kHz): the wider clip is band-limited first, so an empty band above 8 kHz does not dominate it.
    """

    items: list[Item]
    by_emotion: list[Item]
    identity_voices: list[str]
    sanity: list[tuple[Reference, list[Reference]]]

    @classmethod
    def select(cls, sentences: int, voices: Sequence[str], identity_voices: Sequence[str]) -> EvaluationPlan:
        """``sentences`` test sentences in ``voices`` (:func:`select_items`); each output's identity is decided
        among ``identity_voices`` (which must hold ``voices``)."""
        items = select_items(sentences, voices)
        sanity = [(Reference(i.text, EN_US, ESPEAK_DEFAULT), [Reference(i.text, v, e) for _, v, e, _ in SANITY])
                  for i in items[:SANITY_SENTENCES]]
        return cls(items, emotion_items(items), list(identity_voices), sanity)

    def own(self, item: Item) -> list[tuple[int | None, Reference]]:
        """Per identity voice: (the band the output is measured in, that voice's rendering of the item)."""
        bands = [teacher_band(v, item.emotion) for v in self.identity_voices]
        return [(b, target_reference(item, v).in_band(b)) for v, b in zip(self.identity_voices, bands, strict=True)]

    def gap(self, item: Item) -> list[tuple[Reference, Reference]]:
        """The item's target rendering beside each other identity voice's, both in the narrower band."""
        pairs = []
        for v in self.identity_voices:
            if v != item.voice:
                band = narrower(teacher_band(item.voice, item.emotion), teacher_band(v, item.emotion))
                pairs.append((target_reference(item).in_band(band), target_reference(item, v).in_band(band)))
        return pairs

    def synthesized(self) -> list[tuple[Item, int | None]]:
        """Every (synthesized item, band) whose features the evaluation needs (the whole band for F0)."""
        return list(dict.fromkeys([*((i, b) for i in self.items for b in [None, *(band for band, _ in self.own(i))]),
                                   *((i, None) for i in self.by_emotion)]))

    def references(self) -> list[Reference]:
        """Every teacher rendering the evaluation compares with, once each."""
        return list(dict.fromkeys([*(r for i in self.items for _, r in self.own(i)),
                                   *(r for i in self.items for pair in self.gap(i) for r in pair),
                                   *map(target_reference, self.by_emotion),
                                   *(r for base, others in self.sanity for r in (base, *others))]))


def target_reference(item: Item, voice: str | None = None) -> Reference:
    """The teacher's rendering of ``item``'s sentence and emotion, in ``voice`` (default: the item's)."""
    return Reference(item.text, CORPUS_VOICES[voice or item.voice], EMOTIONS[item.emotion])


@dataclass
class Measured:
    """The features of every clip of a :class:`EvaluationPlan` and the MCD-DTW distances between them, by name."""

    refs: dict[Reference, Features]
    synths: dict[tuple[Item, int | None], Features]
    copies: dict[Item, Features]
    #: "own" (per item: its MCD to each identity voice's rendering), "copy" (per emotion item), "gap" (per item:
    #: the target rendering to the other voices'), "sanity_loud" and "sanity_all" (per sanity base)
    distances: dict[str, list[list[float]]]


def measure(work: EvaluationPlan, synths: Mapping[Item, Clip], copies: Mapping[Item, np.ndarray],
            args: argparse.Namespace, timings: dict[str, float]) -> Measured:
    """Features of the renderings (cached), of the synthesized and copied clips, then MCD-DTW, in ``args.jobs``
    processes."""
    refs = work.references()
    versions = teacher_versions({r.voice.teacher for r in refs})
    keys = work.synthesized()
    with process_pool(args.jobs) as pool:
        with timed(timings, "teacher renders + features"):
            ref_feats = dict(zip(refs, run_parallel(pool, "teacher features", reference_features,
                                                    [(r, args.cache, versions) for r in refs]), strict=True))
        with timed(timings, "synthesized features"):
            clips = run_groups(pool, "synthesized features", band_features,
                               {"synth": [(synths[i].audio, band) for i, band in keys],
                                "copy": [(c, teacher_band(i.voice, i.emotion)) for i, c in copies.items()]})
        synth_feats = dict(zip(keys, clips["synth"], strict=True))
        copy_feats = dict(zip(copies, clips["copy"], strict=True))
        speech = {r: f.speech for r, f in ref_feats.items()}

        def own(item: Item) -> tuple[list[np.ndarray], list[tuple[int, np.ndarray]]]:
            bands = list(dict.fromkeys(band for band, _ in work.own(item)))
            return ([synth_feats[item, b].speech for b in bands],
                    [(bands.index(band), speech[r]) for band, r in work.own(item)])

        jobs = {
            "own": [own(i) for i in work.items],
            "copy": [([copy_feats[i].speech], [(0, speech[target_reference(i)])]) for i in work.by_emotion],
            "gap": [([speech[a] for a, _ in work.gap(i)], [(k, speech[b]) for k, (_, b) in enumerate(work.gap(i))])
                    for i in work.items],
            "sanity_loud": [([speech[base]], [(0, speech[r]) for r in others]) for base, others in work.sanity],
            "sanity_all": [([ref_feats[base].mcep], [(0, ref_feats[r].mcep) for r in others])
                           for base, others in work.sanity],
        }
        with timed(timings, "MCD-DTW"):
            distances = run_groups(pool, "MCD-DTW", _mcds, jobs)
    return Measured(ref_feats, synth_feats, copy_feats, distances)


def evaluate(args: argparse.Namespace, command: str, ckpt: Any, bank: Any, bank_source: str,
             voices: Sequence[str]) -> Evaluation:
    """Synthesize ``voices`` with ``bank``'s presets, render, measure; write plots and samples beside ``args.out``.
    Identity is decided among the voices the checkpoint learned and ``voices``."""
    # torch (the model extra): an optional heavy dependency, kept out of the spawned feature workers.
    from tts_triton.models.checkpoint import UNTRAINED_LABEL, fingerprint
    from tts_triton.serving.voice import Voice

    timings: dict[str, float] = {}
    identity_voices = [v for v in CORPUS_VOICES if v in ckpt.voices or v in voices]
    with timed(timings, "load"):
        work = EvaluationPlan.select(args.sentences or min_sentences(voices), voices, identity_voices)
        if not ckpt.trained:
            print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
        networks = Voice(ckpt).backend
        stages = networks.stages
        backend = RecordingBackend(networks)
    with timed(timings, "synthesis"):
        to_synthesize = list(dict.fromkeys([*work.items, *work.by_emotion]))
        progress = ProgressLine("synthesize", len(to_synthesize))
        synths: dict[Item, Clip] = {}
        for item in to_synthesize:
            style = bank.style(item.voice, item.emotion)
            synths[item] = asyncio.run(synthesize(backend, ckpt.config, item.text, style))
            progress.advance()
    with timed(timings, "vocoder copy-synthesis"):
        emotion_audio = {i: render(i.text, CORPUS_VOICES[i.voice], EMOTIONS[i.emotion]) for i in work.by_emotion}
        copies = {i: copy_synthesis(stages[contract.VOCODER].vocode, x) for i, x in emotion_audio.items()}
    m = measure(work, synths, copies, args, timings)
    utterances = [ScoredUtterance(i, len(synths[i].audio) / audio.SAMPLE_RATE, synths[i].hit_max_steps,
                                  dict(zip(identity_voices, own, strict=True)), min(gap, default=float("nan")))
                  for i, own, gap in zip(work.items, m.distances["own"], m.distances["gap"], strict=True)]
    sanity = {label: [d[k] for d in m.distances["sanity_loud"]] for k, (label, *_) in enumerate(SANITY)}
    sanity_all_frames = {label: [d[k] for d in m.distances["sanity_all"]] for k, (label, *_) in enumerate(SANITY)}
    contours = {"synthesized": {i: m.synths[i, None].f0 for i in work.by_emotion},
                "vocoder copy": {i: m.copies[i].f0 for i in work.by_emotion},
                "teacher": {i: m.refs[target_reference(i)].f0 for i in work.by_emotion}}
    emotion_f0 = {source: emotion_means(c) for source, c in contours.items()}
    with timed(timings, "plots + samples"):
        # the first voice's shortest sentence
        focus = next(i for i in work.items if i.sentence_id == work.by_emotion[0].sentence_id)
        focus_contours = {source: {i.emotion: f0 for i, f0 in c.items()
                                   if (i.voice, i.text) == (focus.voice, focus.text)}
                          for source, c in contours.items()}
        plots = write_plots(args.out.parent / "eval", focus, synths[focus], emotion_audio[focus],
                            ckpt.config.decoder.frames_per_step, focus_contours)
        samples = write_samples(args.out.parent / "samples", work.items, [synths[i] for i in work.items])
    copy_mcd = [d[0] for d in m.distances["copy"]]
    return Evaluation(command, ckpt.name, ckpt.trained, fingerprint(ckpt)[:16], ckpt.info, bank_source, list(voices),
                      identity_voices, bank.default_voice, utterances, emotion_f0, copy_mcd, sanity,
                      sanity_all_frames, timings, plots, samples)
