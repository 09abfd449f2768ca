"""The evaluation's measures: DTW, MCD, the voice-identity and emotion-order decisions (fast, no model)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tts_triton.core import audio
from tts_triton.data.prosody import EMOTIONS, PITCH_ORDER, VOICES, render
from tts_triton.evaluate import measures, report, run

espeak_ng = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not on PATH")


def test_dtw_aligns_a_stretched_sequence() -> None:
    a = np.array([0.0, 1.0, 2.0, 3.0])
    b = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 3.0])
    path = measures.dtw(np.abs(a[:, None] - b[None, :]))
    assert path.tolist() == [[0, 0], [1, 1], [1, 2], [2, 3], [3, 4], [3, 5]]


def test_dtw_path_is_monotonic_and_complete() -> None:
    cost = np.random.default_rng(0).random((7, 11))
    path = measures.dtw(cost)
    assert path[0].tolist() == [0, 0] and path[-1].tolist() == [6, 10]
    steps = np.diff(path, axis=0)
    assert {tuple(s) for s in steps} <= {(1, 0), (0, 1), (1, 1)}


def test_dtw_finds_the_cheapest_path() -> None:
    cost = np.random.default_rng(1).random((5, 4))

    def best(i: int, j: int) -> float:  # brute force over all monotonic paths
        if i == 0 and j == 0:
            return cost[0, 0]
        options = [best(i - di, j - dj) for di, dj in ((1, 1), (1, 0), (0, 1)) if i - di >= 0 and j - dj >= 0]
        return cost[i, j] + min(options)

    path = measures.dtw(cost)
    assert cost[path[:, 0], path[:, 1]].sum() == pytest.approx(best(4, 3))


def test_mcd_of_a_known_difference() -> None:
    a = np.zeros((6, 24))
    b = np.full((6, 24), 0.1)
    expected = 10 / np.log(10) * np.sqrt(2 * 24 * 0.01)
    assert measures.mcd(a, b) == pytest.approx(expected)
    assert measures.mcd(a, np.repeat(a, 3, axis=0)) == 0.0  # a time-stretched copy aligns exactly


def test_mcd_is_symmetric() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(40, 24)), rng.normal(size=(55, 24))
    assert measures.mcd(a, b) == pytest.approx(measures.mcd(b, a))
    assert measures.mcd(a, b) > 0


def _vowel(f0: float, seconds: float = 0.6, formant: float = 700.0) -> np.ndarray:
    """A buzzy harmonic tone with one resonance, between two stretches of silence."""
    t = np.arange(int(seconds * audio.SAMPLE_RATE)) / audio.SAMPLE_RATE
    harmonics = np.arange(1, int(4000 / f0))
    gains = 1.0 / (1.0 + ((harmonics * f0 - formant) / 150.0) ** 2)
    tone = (gains[:, None] * np.sin(2 * np.pi * f0 * harmonics[:, None] * t[None, :])).sum(0)
    silence = np.zeros(audio.SAMPLE_RATE // 5)
    return np.concatenate([silence, 0.3 * tone / np.abs(tone).max(), silence])


def test_features_of_identical_signals_give_zero_mcd_and_drop_silence() -> None:
    x = _vowel(120.0)
    f = measures.features(x)
    frames = len(x) / audio.SAMPLE_RATE * 1000 / measures.FRAME_PERIOD_MS
    assert f.mcep.shape[1] == measures.MCEP_ORDER and abs(len(f.mcep) - frames) <= 2
    assert 0.6 < f.loud.mean() < 0.8  # the 0.2 s silences on either side are dropped
    assert measures.mcd(f.speech, measures.features(x.copy()).speech) == 0.0
    assert np.median(f.f0[f.loud & (f.f0 > 0)]) == pytest.approx(120.0, rel=0.03)
    other = measures.features(_vowel(120.0, formant=2000.0))
    assert measures.mcd(f.speech, other.speech) > 1.0


def test_identity_needs_the_target_strictly_nearest() -> None:
    assert measures.identity_correct({"m1": 3.0, "m2": 5.0, "f1": 9.0}, "m1")
    assert not measures.identity_correct({"m1": 5.0, "m2": 3.0, "f1": 9.0}, "m1")
    assert not measures.identity_correct({"m1": 3.0, "m2": 3.0, "f1": 9.0}, "m1")


def test_order_matches_pitch_order() -> None:
    rising = {e: 100.0 + 10 * k for k, e in enumerate(PITCH_ORDER)}
    assert measures.order_matches(rising)
    swapped = {**rising, PITCH_ORDER[0]: rising[PITCH_ORDER[1]] + 1}
    assert not measures.order_matches(swapped)
    assert not measures.order_matches({**rising, PITCH_ORDER[2]: float("nan")})
    assert not measures.order_matches({e: f for e, f in rising.items() if e != PITCH_ORDER[-1]})


def test_mean_f0_pools_voiced_frames() -> None:
    assert measures.mean_f0([np.array([0.0, 100.0, 200.0]), np.array([300.0, 0.0])]) == pytest.approx(200.0)
    assert np.isnan(measures.mean_f0([np.zeros(4)]))


def test_fifty_sentences_cover_every_voice_and_emotion_once() -> None:
    items = measures.select_items(50)
    assert len({i.sentence_id for i in items}) == 50
    assert sorted((i.voice, i.emotion) for i in items) == sorted((v, e) for v in VOICES for e in EMOTIONS)
    assert [i.emotion for i in items[:5]] == list(EMOTIONS)  # the corpus's emotion for each test sentence
    with pytest.raises(ValueError):
        measures.select_items(0)


def test_emotion_sentences_are_each_voices_shortest_in_every_emotion() -> None:
    items = measures.select_items(50)
    chosen = measures.emotion_items(items, per_voice=2)
    assert len(chosen) == len(VOICES) * 2 * len(PITCH_ORDER)
    for voice in VOICES:
        mine = [i for i in chosen if i.voice == voice]
        assert [i.emotion for i in mine] == list(PITCH_ORDER) * 2
        shortest = sorted((i.text for i in items if i.voice == voice), key=len)[:2]
        assert [i.text for i in mine[:: len(PITCH_ORDER)]] == shortest


def test_emotion_means_pool_sentences_per_voice_and_emotion() -> None:
    contours = {measures.Item("s0", "a", "m1", "sad"): np.array([0.0, 100.0]),
                measures.Item("s1", "b", "m1", "sad"): np.array([120.0, 140.0]),
                measures.Item("s0", "a", "m1", "happy"): np.array([200.0])}
    assert measures.emotion_means(contours) == {"m1": {"sad": 120.0, "happy": 200.0}}


def test_emotion_order_per_voice() -> None:
    f0 = {"m1": {e: 100.0 + 10 * k for k, e in enumerate(PITCH_ORDER)},
          "f1": {e: 200.0 - 10 * k for k, e in enumerate(PITCH_ORDER)}}
    order = measures.emotion_order(f0)
    assert order == {"m1": True, "f1": False}
    assert measures.percent(order) == 50.0


def test_info_summary_keeps_scalars_and_skips_an_earlier_evaluation() -> None:
    info = {"name": "default", "acoustic": {"steps": 7741, "lr": 1e-3},
            "metrics": {"utterances": [{"id": "s00000", "mcd_db": {"m1": 5.0}}]}}
    assert report._info_summary(info) == "acoustic: steps 7741; name: default"


@espeak_ng
def test_espeak_variants_order_as_expected() -> None:
    """Same voice at another rate < another male variant < a female variant, as in the report's sanity check."""
    text = "The cat sat on the warm mat."
    others = {label.split()[0]: (voice, emotion) for label, voice, emotion, _ in run.SANITY}
    base, rate, m3, f3 = (measures.features(render(text, voice, emotion)).speech for voice, emotion in (
        (run.EN_US, run.ESPEAK_DEFAULT), others["en-us"], others["en-us+m3"], others["en-us+f3"]))
    assert measures.mcd(base, rate) < measures.mcd(base, m3) < measures.mcd(base, f3)


def test_run_groups_returns_each_group_by_name_in_order() -> None:
    groups = {"a": [(1,), (2,)], "none": [], "b": [(3,)]}
    with ThreadPoolExecutor(2) as pool:
        assert measures.run_groups(pool, "square", lambda x: x * x, groups) == {"a": [1, 4], "none": [], "b": [9]}
