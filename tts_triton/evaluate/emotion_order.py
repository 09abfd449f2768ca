"""Emotion order on held-out sentences, for any corpus voice (``prosody.CORPUS_VOICES``, slt included): the
first few held-out sentences (:mod:`~tts_triton.evaluate.heldout`) said in every emotion by the model (the
bank's presets) and by the voice's teacher; per voice, does mean F0 rise along ``prosody.PITCH_ORDER``?
F0 is WORLD harvest's, as in the evaluation (:func:`~tts_triton.evaluate.measures.features`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from tts_triton.data.prosody import PITCH_ORDER
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.measures import EmotionF0, Item, emotion_means, emotion_order, percent
from tts_triton.jobs.progress import ProgressLine

MODEL, TEACHER = "model", "teacher"


def f0_of(samples: np.ndarray) -> np.ndarray:
    """The F0 contour (Hz, 0 unvoiced, 5 ms frames) of float audio at SAMPLE_RATE."""
    from tts_triton.evaluate.measures import features

    return features(samples).f0


def teacher_f0(text: str, voice: str, emotion: str) -> np.ndarray:
    """:func:`f0_of` the teacher's rendering of ``text`` in a corpus voice and emotion."""
    from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, render

    return f0_of(render(text, CORPUS_VOICES[voice], EMOTIONS[emotion]))


@dataclass
class EmotionCheck:
    """``f0[source][voice][emotion]``: mean F0 (Hz) of ``sentences`` said with that preset, source
    :data:`MODEL` or :data:`TEACHER`."""

    sentences: list[str]
    f0: dict[str, EmotionF0]
    seconds: float

    def ordered(self, source: str) -> dict[str, bool]:
        return emotion_order(self.f0[source])


def emotion_check(ckpt: Any, bank: Any, voices: Sequence[str], count: int, jobs: int) -> EmotionCheck:
    """Synthesize the first ``count`` held-out sentences in every emotion of each of ``voices`` (each in
    ``bank``); F0 of those clips and of the teacher's renderings in ``jobs`` worker processes."""
    from tts_triton.evaluate.measures import process_pool
    from tts_triton.evaluate.synthesis import RecordingBackend, synthesize
    from tts_triton.serving.voice import Voice

    if not 1 <= count <= len(HELDOUT_SENTENCES):
        raise ValueError(f"emotion sentences {count}: must be in 1..{len(HELDOUT_SENTENCES)}")
    sentences = list(HELDOUT_SENTENCES[:count])
    items = [Item(f"heldout-{k}", s, v, e) for v in voices for e in PITCH_ORDER for k, s in enumerate(sentences)]
    styles = {(i.voice, i.emotion): bank.style(i.voice, i.emotion) for i in items}
    start = time.monotonic()
    backend = RecordingBackend(Voice(ckpt).backend)
    with process_pool(jobs) as pool:
        teacher: dict[Item, Future[np.ndarray]] = {i: pool.submit(teacher_f0, i.text, i.voice, i.emotion)
                                                   for i in items}
        progress = ProgressLine("emotion order (synthesize, then F0)", 3 * len(items))
        model: dict[Item, Future[np.ndarray]] = {}
        for i in items:
            clip = asyncio.run(synthesize(backend, ckpt.config, i.text, styles[i.voice, i.emotion]))
            model[i] = pool.submit(f0_of, clip.audio)
            progress.advance(detail=f"model {i.voice} {i.emotion}")
        contours: dict[str, dict[Item, np.ndarray]] = {}
        for source, futures in ((MODEL, model), (TEACHER, teacher)):
            contours[source] = {}
            for i, f in futures.items():
                contours[source][i] = f.result()
                progress.advance(detail=f"F0 {source}")
    return EmotionCheck(sentences, {s: emotion_means(c) for s, c in contours.items()}, time.monotonic() - start)


def emotion_markdown(check: EmotionCheck) -> list[str]:
    """The report's section: per voice and source the mean F0 of each emotion and whether the order holds."""
    lines = ["## Emotion order", "",
             f"The first {len(check.sentences)} held-out sentences in every emotion (the bank's presets for the "
             "model); mean F0 (Hz, WORLD harvest) over their voiced frames. The order must rise "
             + " < ".join(PITCH_ORDER) + ".", "",
             "| voice | source | " + " | ".join(PITCH_ORDER) + " | order holds |",
             "|---" * (len(PITCH_ORDER) + 3) + "|"]
    for voice in check.f0[MODEL]:
        for source in (MODEL, TEACHER):
            f0 = check.f0[source][voice]
            lines.append(f"| {voice} | {source} | " + " | ".join(f"{f0[e]:.0f}" for e in PITCH_ORDER)
                         + f" | {'yes' if check.ordered(source)[voice] else 'no'} |")
    lines += ["", f"Model voices in order: {percent(check.ordered(MODEL)):.0f} %. "
                  f"Run time: {check.seconds:.0f} s.", ""]
    return lines


def emotion_json(check: EmotionCheck) -> dict[str, Any]:
    """The check's numbers as JSON-ready data."""
    return {"sentences": check.sentences, "mean_f0_hz": check.f0, "seconds": round(check.seconds, 1),
            "ordered": {source: check.ordered(source) for source in check.f0}}
