"""The evaluation's measures, which the scripts under ``scripts/`` import too: WORLD/SPTK features, MCD-DTW,
voice identity and emotion order, the test sentences and the process pool that computes them, and the standard
error the judged reports give their means."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing import get_context
from typing import Any

import numpy as np

from tts_triton.core import audio
from tts_triton.data.prosody import EMOTIONS, PITCH_ORDER, VOICES
from tts_triton.data.sentences import generate
from tts_triton.jobs.progress import ProgressLine
from tts_triton.jobs.workers import single_threaded_blas

#: WORLD / SPTK analysis: 5 ms frames, harvest F0 search range, 24th-order mel-cepstrum with the
#: all-pass constant that approximates the mel scale at 22.05 kHz (``pysptk.util.mcepalpha(22050)``).
FRAME_PERIOD_MS = 5.0
F0_FLOOR_HZ, F0_CEIL_HZ = 50.0, 800.0
MCEP_ORDER = 24
MCEP_ALPHA = 0.455
#: Frames whose spectral-envelope energy is more than this many dB below the utterance's loudest
#: frame are dropped before DTW (the corpus trims silence with the same 40 dB).
ENERGY_FLOOR_DB = 40.0
#: ``10 / ln 10 * sqrt(2)``: turns a Euclidean mel-cepstral distance into dB.
MCD_SCALE = 10.0 / np.log(10.0) * np.sqrt(2.0)
FEATURE_SETTINGS = (FRAME_PERIOD_MS, F0_FLOOR_HZ, F0_CEIL_HZ, MCEP_ORDER, MCEP_ALPHA, ENERGY_FLOOR_DB)
#: Sentences per voice said in every emotion for the emotion-order check. With one, espeak-ng's own
#: renderings break the order for f1 ("Watch out for the shield!" comes out lower happy than angry).
EMOTION_SENTENCES_PER_VOICE = 2
#: voice -> emotion -> mean F0 (Hz) of the same sentence in each emotion.
EmotionF0 = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Features:
    """Per 5 ms frame: mel-cepstrum c1..c24 ``[frames, 24]``, F0 in Hz (0 unvoiced), and whether it is loud."""

    mcep: np.ndarray
    f0: np.ndarray
    loud: np.ndarray

    @property
    def speech(self) -> np.ndarray:
        """The mel-cepstra of the loud frames: what MCD compares."""
        return self.mcep[self.loud]


def world() -> tuple[Any, Any]:
    """(pyworld, pysptk), imported without the warning that both give about the deprecated pkg_resources."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # optional heavy dependencies (the eval extra), needed only by the feature workers
        import pysptk
        import pyworld
    return pyworld, pysptk


def features(samples: np.ndarray, sample_rate: int = audio.SAMPLE_RATE) -> Features:
    """WORLD harvest F0 + CheapTrick envelope every 5 ms -> ``pysptk.sp2mc`` (order 24, alpha 0.455), c0 dropped.

    A frame is loud when its envelope energy is within :data:`ENERGY_FLOOR_DB` of the loudest frame's.
    """
    pyworld, pysptk = world()
    x = np.asarray(samples, dtype=np.float64)
    f0, times = pyworld.harvest(x, sample_rate, f0_floor=F0_FLOOR_HZ, f0_ceil=F0_CEIL_HZ,
                                frame_period=FRAME_PERIOD_MS)
    envelope = pyworld.cheaptrick(x, f0, times, sample_rate)
    energy_db = 10.0 * np.log10(envelope.sum(axis=1))
    mcep = pysptk.sp2mc(envelope, MCEP_ORDER, MCEP_ALPHA)[:, 1:]
    return Features(mcep, f0, energy_db > energy_db.max() - ENERGY_FLOOR_DB)


def dtw(cost: np.ndarray) -> np.ndarray:
    """Cheapest monotonic path through ``cost [n, m]`` from (0, 0) to (n-1, m-1), with steps (1,0), (0,1), (1,1).

    Returns the path as ``[length, 2]`` (row, column) pairs. Ties prefer the diagonal.
    """
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for k in range(2, n + m + 1):  # anti-diagonals i + j = k depend only on the two before them
        i = np.arange(max(1, k - m), min(n, k - 1) + 1)
        j = k - i
        acc[i, j] = cost[i - 1, j - 1] + np.minimum(np.minimum(acc[i - 1, j - 1], acc[i - 1, j]), acc[i, j - 1])
    i, j = n, m
    path = [(n - 1, m - 1)]
    while (i, j) != (1, 1):
        i, j = min(((i - 1, j - 1), (i - 1, j), (i, j - 1)), key=lambda ij: acc[ij])
        path.append((i - 1, j - 1))
    return np.array(path[::-1])


def mcd(a: np.ndarray, b: np.ndarray) -> float:
    """MCD-DTW in dB between mel-cepstra ``[frames, order]`` (c0 already left out).

    ``(10 / ln 10) * sqrt(2 * sum_d (a_d - b_d)^2)`` averaged over the frame pairs of the DTW path
    that minimises the summed Euclidean distance.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    squared = (a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2.0 * a @ b.T
    path = dtw(np.sqrt(np.maximum(squared, 0.0)))
    exact = np.sqrt(((a[path[:, 0]] - b[path[:, 1]]) ** 2).sum(1))  # no cancellation error: identical -> 0
    return float(MCD_SCALE * exact.mean())


def identity_correct(mcds: Mapping[str, float], target: str) -> bool:
    """True when ``target``'s MCD is strictly lower than every other voice's."""
    return all(mcds[target] < value for voice, value in mcds.items() if voice != target)


def order_matches(f0_by_emotion: Mapping[str, float], order: Sequence[str] = PITCH_ORDER) -> bool:
    """True when mean F0 strictly rises along ``order`` (a missing or NaN mean fails)."""
    values = [f0_by_emotion.get(e, np.nan) for e in order]
    return all(a < b for a, b in itertools.pairwise(values))


def mean_f0(contours: Sequence[np.ndarray]) -> float:
    """Mean F0 in Hz over the voiced frames of ``contours`` (NaN when none is voiced)."""
    voiced = np.concatenate([np.zeros(0), *(c[c > 0] for c in contours)])
    return float(voiced.mean()) if voiced.size else float("nan")


def emotion_means(contours: Mapping[Item, np.ndarray]) -> EmotionF0:
    """voice -> emotion -> mean F0 over the voiced frames of all that pair's F0 contours."""
    groups: dict[str, dict[str, list[np.ndarray]]] = {}
    for item, f0 in contours.items():
        groups.setdefault(item.voice, {}).setdefault(item.emotion, []).append(f0)
    return {voice: {e: mean_f0(c) for e, c in by_emotion.items()} for voice, by_emotion in groups.items()}


def emotion_order(f0: EmotionF0) -> dict[str, bool]:
    """Per voice: does its mean F0 rise along PITCH_ORDER?"""
    return {voice: order_matches(by_emotion) for voice, by_emotion in f0.items()}


def percent(flags: Mapping[str, bool]) -> float:
    """Share of true values in %, NaN when empty."""
    return 100.0 * float(np.mean(list(flags.values()))) if flags else float("nan")


@dataclass(frozen=True)
class Item:
    """A test sentence and the (voice, emotion) it is synthesized with."""

    sentence_id: str
    text: str
    voice: str
    emotion: str


def select_items(count: int, voices: Sequence[str] = tuple(VOICES)) -> list[Item]:
    """The first ``count`` test sentences; sentence ``j`` gets emotion ``j % 5`` (as in the corpus), voice
    ``voices[j // 5]``, so ``5 * len(voices)`` sentences say every voice x emotion pair once.

    Indices wrap around the emotion and voice lists. Raises ``ValueError`` unless 1 <= ``count`` <= test sentences.
    """
    tests = [s for s in generate() if s.split == "test"]
    if not 1 <= count <= len(tests):
        raise ValueError(f"--sentences must be in 1..{len(tests)}")
    emotions = list(EMOTIONS)
    return [Item(s.id, s.text, voices[(j // len(emotions)) % len(voices)], emotions[j % len(emotions)])
            for j, s in enumerate(tests[:count])]


def emotion_items(items: Sequence[Item], per_voice: int = EMOTION_SENTENCES_PER_VOICE) -> list[Item]:
    """For each voice of ``items`` (in the order they first appear), its ``per_voice`` shortest sentences in
    every emotion.

    Ordered by voice, then sentence (shortest first), then PITCH_ORDER.
    """
    chosen = [item for voice in dict.fromkeys(i.voice for i in items)
              for item in sorted((i for i in items if i.voice == voice), key=lambda i: len(i.text))[:per_voice]]
    return [replace(item, emotion=e) for item in chosen for e in PITCH_ORDER]


@contextmanager
def process_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """``jobs`` spawned worker processes with single-threaded BLAS (set while they start, restored after)."""
    with single_threaded_blas(), ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        yield pool


def run_parallel(pool: Executor, label: str, fn: Any, args: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``[fn(*a) for a in args]`` in ``pool``, in order, with progress."""
    progress = ProgressLine(label, len(args))
    futures = [pool.submit(fn, *a) for a in args]
    for future in futures:
        future.result()
        progress.advance()
    return [f.result() for f in futures]


def run_groups(pool: Executor, label: str, fn: Any,
               groups: Mapping[str, Sequence[tuple[Any, ...]]]) -> dict[str, list[Any]]:
    """:func:`run_parallel` over every group's arguments at once; the results by group name, in order."""
    results = iter(run_parallel(pool, label, fn, [a for args in groups.values() for a in args]))
    return {name: [next(results) for _ in args] for name, args in groups.items()}


def standard_error(values: Sequence[float] | np.ndarray) -> float:
    """The standard error of the mean of ``values`` (sample deviation over the square root of the count; 0 for one)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
