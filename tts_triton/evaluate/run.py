"""One evaluation run: synthesize the test sentences, render espeak-ng's references (features cached), measure,
and write the report beside ``--out`` (see :mod:`tts_triton.evaluate`)."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton import audio, contract
from tts_triton.data import espeak
from tts_triton.data.prosody import EMOTIONS, ESPEAK_NG, VOICES, Emotion, Voice, render
from tts_triton.evaluate.figures import write_plots, write_samples
from tts_triton.evaluate.metrics import (
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
from tts_triton.evaluate.synthesis import Clip, RecordingBackend, copy_synthesis, synthesize, voice_bank_for
from tts_triton.paths import cache_dir
from tts_triton.progress import ProgressLine

MIN_SENTENCES = 50
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


def default_cache() -> Path:
    """The cache of espeak-ng features, under :func:`~tts_triton.paths.cache_dir` (read at the call)."""
    return cache_dir() / "eval-features"


@dataclass(frozen=True)
class Reference:
    """One espeak-ng rendering: ``text`` in ``voice`` with ``emotion`` (see :func:`prosody.render`)."""

    text: str
    voice: Voice
    emotion: Emotion

    def key(self, espeak_version: str) -> str:
        e = self.emotion
        fields = (espeak_version, self.voice.speaker, e.pitch, e.range, e.rate, e.amplitude, self.text,
                  FEATURE_SETTINGS)
        return hashlib.sha256(repr(fields).encode()).hexdigest()[:32]


def reference_features(ref: Reference, cache: Path, espeak_version: str) -> Features:
    """:func:`features` of ``ref``'s rendering, read from or written to ``cache``."""
    path = cache / f"{ref.key(espeak_version)}.npz"
    if path.exists():
        with np.load(path) as data:
            return Features(data["mcep"], data["f0"], data["loud"])
    result = features(render(ref.text, ref.voice, ref.emotion))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.npz")
    np.savez(tmp, mcep=result.mcep, f0=result.f0, loud=result.loud)
    tmp.replace(path)
    return result


def _mcds(synth: np.ndarray, refs: Sequence[np.ndarray]) -> list[float]:
    return [mcd(synth, r) for r in refs]


@dataclass
class ScoredUtterance:
    item: Item
    seconds: float
    hit_max_steps: bool
    mcds: dict[str, float]  # voice -> MCD against that voice's rendering (same sentence and emotion)
    #: MCD from the target voice's rendering to the nearest other voice's: how near espeak-ng's own voices are
    espeak_gap: float

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
    utterances: list[ScoredUtterance]
    #: "synthesized", "vocoder copy" and "espeak-ng" -> voice -> emotion -> mean F0 of the emotion sentences
    emotion_f0: dict[str, EmotionF0]
    copy_mcd: list[float]  # vocoder copy-synthesis vs espeak-ng, one per emotion sentence
    sanity: dict[str, list[float]]  # label -> MCD per sentence (loud frames, as everywhere)
    sanity_all_frames: dict[str, list[float]]  # the same with every frame kept
    timings: dict[str, float]
    plots: dict[str, str]
    samples: list[tuple[str, Item, float]]

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
    """What an evaluation synthesizes and renders: ``items`` (MCD, identity, stops), ``by_emotion`` (F0
    order and copy-synthesis), every target voice's rendering of each item and the sanity renderings."""

    items: list[Item]
    by_emotion: list[Item]
    targets: dict[Item, list[Reference]]
    sanity: list[tuple[Reference, list[Reference]]]

    @classmethod
    def select(cls, sentences: int) -> EvaluationPlan:
        items = select_items(sentences)
        targets = {item: [target_reference(item, v) for v in VOICES] for item in items}
        sanity = [(Reference(i.text, EN_US, ESPEAK_DEFAULT), [Reference(i.text, v, e) for _, v, e, _ in SANITY])
                  for i in items[:SANITY_SENTENCES]]
        return cls(items, emotion_items(items), targets, sanity)

    def references(self) -> list[Reference]:
        """Every espeak-ng rendering the evaluation compares with, once each."""
        return list(dict.fromkeys([*itertools.chain(*self.targets.values()), *map(target_reference, self.by_emotion),
                                   *(r for base, others in self.sanity for r in (base, *others))]))


def target_reference(item: Item, voice: str | None = None) -> Reference:
    """espeak-ng's rendering of ``item``'s sentence and emotion, in ``voice`` (default: the item's)."""
    return Reference(item.text, VOICES[voice or item.voice], EMOTIONS[item.emotion])


@dataclass
class Measured:
    """The features of every clip of a :class:`EvaluationPlan` and the MCD-DTW distances between them, by name."""

    refs: dict[Reference, Features]
    synths: dict[Item, Features]
    copies: dict[Item, Features]
    #: "own" (per item: its MCD to each voice's rendering), "copy" (per emotion item), "gap" (per item:
    #: espeak-ng's target rendering to the other voices'), "sanity_loud" and "sanity_all" (per sanity base)
    distances: dict[str, list[list[float]]]


def measure(work: EvaluationPlan, synths: Mapping[Item, Clip], copies: Mapping[Item, np.ndarray],
            args: argparse.Namespace, timings: dict[str, float]) -> Measured:
    """Features of the renderings (cached), of the synthesized and copied clips, then MCD-DTW, in ``args.jobs``
    processes."""
    refs = work.references()
    version = espeak.espeak_version()
    with process_pool(args.jobs) as pool:
        with timed(timings, "espeak-ng renders + features"):
            ref_feats = dict(zip(refs, run_parallel(pool, "espeak-ng features", reference_features,
                                                    [(r, args.cache, version) for r in refs]), strict=True))
        with timed(timings, "synthesized features"):
            clips = run_groups(pool, "synthesized features", features,
                               {"synth": [(c.audio,) for c in synths.values()],
                                "copy": [(c,) for c in copies.values()]})
        synth_feats = dict(zip(synths, clips["synth"], strict=True))
        copy_feats = dict(zip(copies, clips["copy"], strict=True))
        speech = {r: f.speech for r, f in ref_feats.items()}
        jobs = {
            "own": [(synth_feats[i].speech, [speech[r] for r in work.targets[i]]) for i in work.items],
            "copy": [(copy_feats[i].speech, [speech[target_reference(i)]]) for i in work.by_emotion],
            "gap": [(speech[target_reference(i)], [speech[r] for r in work.targets[i] if r.voice.name != i.voice])
                    for i in work.items],
            "sanity_loud": [(speech[base], [speech[r] for r in others]) for base, others in work.sanity],
            "sanity_all": [(ref_feats[base].mcep, [ref_feats[r].mcep for r in others]) for base, others in work.sanity],
        }
        with timed(timings, "MCD-DTW"):
            distances = run_groups(pool, "MCD-DTW", _mcds, jobs)
    return Measured(ref_feats, synth_feats, copy_feats, distances)


def evaluate(args: argparse.Namespace, command: str) -> Evaluation:
    """Synthesize, render, measure; write plots and samples beside ``args.out``."""
    # torch (the model extra): an optional heavy dependency, kept out of the spawned feature workers.
    from tts_triton.checkpoint import UNTRAINED_LABEL, fingerprint, resolve
    from tts_triton.serving.backends import TorchBackend

    timings: dict[str, float] = {}
    with timed(timings, "load + voice bank"):
        work = EvaluationPlan.select(args.sentences)
        ckpt = resolve(args.checkpoint)
        if not ckpt.trained:
            print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
        bank, bank_source = voice_bank_for(args.checkpoint, args.voice_bank, ckpt)
        stages = ckpt.stages()
        backend = RecordingBackend(TorchBackend(stages, ckpt.config))
    with timed(timings, "synthesis"):
        to_synthesize = list(dict.fromkeys([*work.items, *work.by_emotion]))
        progress = ProgressLine("synthesize", len(to_synthesize))
        synths: dict[Item, Clip] = {}
        for item in to_synthesize:
            style = bank.style(item.voice, item.emotion)
            synths[item] = asyncio.run(synthesize(backend, ckpt.config, item.text, style))
            progress.advance()
    with timed(timings, "vocoder copy-synthesis"):
        emotion_audio = {i: render(i.text, VOICES[i.voice], EMOTIONS[i.emotion]) for i in work.by_emotion}
        copies = {i: copy_synthesis(stages[contract.VOCODER].vocode, x) for i, x in emotion_audio.items()}
    m = measure(work, synths, copies, args, timings)
    utterances = [ScoredUtterance(i, len(synths[i].audio) / audio.SAMPLE_RATE, synths[i].hit_max_steps,
                            dict(zip(VOICES, own, strict=True)), min(gap))
                  for i, own, gap in zip(work.items, m.distances["own"], m.distances["gap"], strict=True)]
    sanity = {label: [d[k] for d in m.distances["sanity_loud"]] for k, (label, *_) in enumerate(SANITY)}
    sanity_all_frames = {label: [d[k] for d in m.distances["sanity_all"]] for k, (label, *_) in enumerate(SANITY)}
    contours = {"synthesized": {i: m.synths[i].f0 for i in work.by_emotion},
                "vocoder copy": {i: m.copies[i].f0 for i in work.by_emotion},
                "espeak-ng": {i: m.refs[target_reference(i)].f0 for i in work.by_emotion}}
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
    return Evaluation(command, ckpt.name, ckpt.trained, fingerprint(ckpt)[:16], ckpt.info, bank_source, utterances,
                      emotion_f0, copy_mcd, sanity, sanity_all_frames, timings, plots, samples)
