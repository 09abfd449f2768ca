"""The flite and festival teachers: espeak-ng's pronunciations in CMU phones, flite (kal16) and festival's HTS
voice (slt, every emotion and its pitch variants) driven with them, the weighted plan, a mixed build and its
resumption."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tts_triton.core import audio
from tts_triton.data import cmu, festival, flite
from tts_triton.data import sentences as S
from tts_triton.data.corpus import MANIFEST, SUMMARY, build, conditions, mel_shard_name, plan, resume_point
from tts_triton.data.dataset import Corpus
from tts_triton.data.prosody import (
    CORPUS_VOICES,
    EMOTIONS,
    FESTIVAL,
    FLITE,
    NEUTRAL,
    PITCH_ORDER,
    flite_features,
    rendering,
)

needs_flite = pytest.mark.skipif(any(shutil.which(tool) is None for tool in ("flite", "espeak-ng", "festival")),
                                 reason="flite, festival or espeak-ng not on PATH")
SLT = CORPUS_VOICES["slt"]
KAL16 = CORPUS_VOICES["kal16"]


def test_espeak_symbols_map_to_cmu_phones() -> None:
    assert cmu.to_cmu("bˈeɪkɚ", "baker") == ["b", "ey1", "k", "er0"]
    assert cmu.to_cmu("ˈɑːnvəlˌoʊps", "envelopes") == ["aa1", "n", "v", "ax0", "l", "ow1", "p", "s"]
    assert cmu.to_cmu("wˈɔːɾɚ", "water") == ["w", "ao1", "t", "er0"]  # the flap follows the spelling
    assert cmu.to_cmu("bˈɑːɾi", "body") == ["b", "aa1", "d", "iy0"]
    assert cmu.to_cmu("bˈʌʔn̩", "button") == ["b", "ah1", "t", "ax0", "n"]  # glottal stop, syllabic n
    assert cmu.to_cmu("fˈoːɹ", "four") == ["f", "ao1", "r"]
    assert cmu.to_cmu("nˈɛvɚɹ", "never") == ["n", "eh1", "v", "er0"]  # linking r merges into er
    assert cmu.to_cmu("tʃˈɛɹi dʒˈʌmp", "") == ["ch", "eh1", "r", "iy0", "jh", "ah1", "m", "p"]
    with pytest.raises(cmu.MappingError, match="ɬ"):
        cmu.to_cmu("ɬ")


def test_every_corpus_and_heldout_word_maps() -> None:
    from tts_triton.core.symbols import SYMBOLS
    from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
    from tts_triton.text.frontend import plan_plain

    texts = [s.text for s in S.generate()[:600]] + list(HELDOUT_SENTENCES)
    try:
        sentences = [s for t in texts for s in plan_plain(t)]
    except RuntimeError as exc:  # no libespeak-ng
        pytest.skip(str(exc))
    assert len(sentences) >= len(texts)
    for s in sentences:
        for w in s.words:
            phones = cmu.to_cmu("".join(SYMBOLS[i] for i in s.ids[w.first : w.last]), w.text)
            assert phones and set(p.rstrip("01") for p in phones) <= cmu.CMU_VOWELS | cmu.CMU_CONSONANTS, w.text


def test_flite_words_and_clitics() -> None:
    assert cmu.flite_words("Smith's") == ["smith", "'s"]
    assert cmu.flite_words("o'clock") == ["oclock"]
    assert cmu.flite_words("don't") == ["dont"]
    assert cmu.flite_words("I'll") == ["i", "'ll"]
    assert cmu.flite_words("well-known") == ["well", "known"]
    assert cmu.split_clitic(["let", "'s"], ["l", "eh1", "t", "s"]) == [("let", ["l", "eh1", "t"]), ("'s", ["s"])]
    assert cmu.split_clitic(["well", "known"], ["w", "eh1", "l"]) is None
    lexicon, left = cmu.addenda([("The", "ðə"), ("cat's", "kˈæts"), ("the", "ði"), ("x-ray", "ˈɛksɹeɪ")])
    assert lexicon == {"the": ["dh", "ax0"], "cat": ["k", "ae1", "t"], "'s": ["s"]}
    assert left == 2  # "the" said another way, and a hyphenated word
    assert cmu.addenda_text({"cat": ["k", "ae1", "t"]}) == "cat : k ae1 t\n"
    assert cmu.surface(["k", "ae1", "t", "ax0"]) == ["k", "ae", "t", "ax"]


def test_agreement_counts_phone_edits() -> None:
    assert cmu.agreement(["a", "b", "c", "d"], ["pau", "a", "b", "c", "d", "pau"]) == 1.0
    assert cmu.agreement(["a", "b", "c", "d"], ["a", "x", "c"]) == 0.5
    assert cmu.agreement(["a"], ["x", "y", "z"]) == 0.0


def test_fft_resampling_keeps_frequency_and_level() -> None:
    t = np.arange(16000) / 16000
    x = 0.5 * np.sin(2 * np.pi * 440 * t)
    y = flite.resample(x, 16000, audio.SAMPLE_RATE)
    assert len(y) == audio.SAMPLE_RATE and y.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(y))
    assert np.argmax(spectrum) == 440 and np.abs(y).max() == pytest.approx(0.5, abs=0.01)


def test_flite_features_follow_the_emotion_table() -> None:
    features = {name: flite_features(KAL16, EMOTIONS[name]) for name in PITCH_ORDER}
    means = [f["int_f0_target_mean"] for f in features.values()]
    assert means == sorted(means) and features["neutral"]["int_f0_target_mean"] == KAL16.f0_hz
    assert features["sad"]["duration_stretch"] > 1 > features["angry"]["duration_stretch"]
    assert features["sad"]["int_f0_target_stddev"] < KAL16.f0_sd_hz < features["surprised"]["int_f0_target_stddev"]


def test_plan_weights_the_natural_voice() -> None:
    utterances = plan(S.generate(600), repeats=3)
    train = Counter(u.voice for u in utterances if u.split == "train")
    espeak_mean = np.mean([n for v, n in train.items() if CORPUS_VOICES[v].teacher == "espeak-ng"])
    per_voice = Counter(v for v, _, _ in conditions(list(CORPUS_VOICES), list(EMOTIONS)))
    # each condition (emotion or pitch variant) of a voice weighs its weight: slt has 5 emotions and 2 variants
    assert per_voice["slt"] == len(EMOTIONS) + len(SLT.pitch_variants) and per_voice["m1"] == len(EMOTIONS)
    assert train["slt"] == pytest.approx(SLT.weight * espeak_mean * per_voice["slt"] / len(EMOTIONS), rel=0.05)
    shifted = [u for u in utterances if u.semitones]
    assert shifted and {u.semitones for u in shifted} == set(SLT.pitch_variants)
    assert all(u.voice == "slt" and u.emotion == NEUTRAL and u.id.endswith(f"{u.semitones:+g}st") for u in shifted)


@needs_flite
@pytest.mark.parametrize(("voice", "emotion", "teacher"),
                         [("slt", "neutral", FESTIVAL), ("slt", "sad", FESTIVAL), ("kal16", "sad", FLITE)])
def test_the_teachers_say_the_front_ends_phonemes(voice: str, emotion: str, teacher: str) -> None:
    assert CORPUS_VOICES[voice].teacher == teacher
    text = "Harold needed a new bottle of water at 7 o'clock; Smith's dog didn't bark."
    driven = rendering(text, CORPUS_VOICES[voice], EMOTIONS[emotion])
    plain = rendering(text, CORPUS_VOICES[voice], EMOTIONS[emotion], drive=False)
    assert driven.agreement is not None and plain.agreement is not None
    assert driven.agreement >= 0.97 > plain.agreement
    x = driven.audio
    peak = 0.5 * EMOTIONS[emotion].amplitude / 100
    assert x.dtype == np.float32 and len(x) % audio.HOP_LENGTH == 0 and np.abs(x).max() == pytest.approx(peak, rel=1e-3)


@needs_flite
def test_flite_refuses_a_bad_addendum() -> None:
    with pytest.raises(flite.FliteError, match="addendum"):
        flite.synthesize("hello", "slt", lexicon={"hello": ["hh", "ax2", "l", "ow1"]})
    assert "slt" in flite.voices() and "flite" in flite.flite_version()


@needs_flite
def test_the_hts_teacher_orders_pitch_by_emotion_and_takes_pitch_variants() -> None:
    pyworld = pytest.importorskip("pyworld")
    text = "The children watched the boats sail slowly past the old lighthouse."
    f0, seconds = [], {}
    for name in PITCH_ORDER:
        x = rendering(text, SLT, EMOTIONS[name]).audio.astype(np.float64)
        track, times = pyworld.dio(x, audio.SAMPLE_RATE, f0_floor=50.0, f0_ceil=800.0)
        track = pyworld.stonemask(x, track, times, audio.SAMPLE_RATE)
        f0.append(track[track > 0].mean())
        seconds[name] = len(x) / audio.SAMPLE_RATE
    assert f0 == sorted(f0), f"slt: mean F0 {f0} not rising along {PITCH_ORDER}"
    assert seconds["sad"] > seconds["neutral"] > seconds["angry"]
    x = rendering(text, SLT, EMOTIONS[NEUTRAL], semitones=4.0).audio.astype(np.float64)
    track, times = pyworld.dio(x, audio.SAMPLE_RATE, f0_floor=50.0, f0_ceil=800.0)
    track = pyworld.stonemask(x, track, times, audio.SAMPLE_RATE)
    assert 2 ** (3 / 12) < track[track > 0].mean() / f0[PITCH_ORDER.index(NEUTRAL)] < 2 ** (5 / 12)
    with pytest.raises(ValueError, match="no pitch offset"):
        rendering(text, KAL16, EMOTIONS[NEUTRAL], semitones=4.0)


@needs_flite
def test_mixed_build_resumes_after_the_last_whole_shard(tmp_path: Path) -> None:
    options = dict(jobs=1, limit=14, voices=["m1", "slt"], emotions=["neutral", "sad"], shard_utterances=4,
                   progress=False)
    whole = tmp_path / "whole"
    summary = build(whole, S.generate(40), **options)
    assert summary["counts"]["voice"].keys() == {"m1", "slt"} and summary["shards"] == 4
    assert summary["agreement"]["utterances"] == summary["counts"]["voice"]["slt"]
    assert summary["agreement"]["mean"] >= 0.97 and "festival" in summary and "flite" not in summary
    corpus = Corpus(whole)
    for e in corpus.entries:
        assert (e.agreement is None) == (e.voice == "m1")
        assert e.n_samples == e.n_frames * audio.HOP_LENGTH
        assert np.abs(audio.mel_spectrogram(corpus.float_audio(e)) - corpus.mel(e).astype(np.float32)).max() < 0.02

    # An interrupted build: a partial manifest, two whole shards, the third one's mel never written.
    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    (cut / MANIFEST).rename(cut / (MANIFEST + ".partial"))
    (cut / SUMMARY).unlink()
    (cut / mel_shard_name(2)).unlink()
    kept, shards = resume_point(cut, plan(S.generate(40), ["m1", "slt"], ["neutral", "sad"])[:14], 4)
    assert (len(kept), shards) == (8, 2)
    build(cut, S.generate(40), **options)
    assert (cut / MANIFEST).read_text() == (whole / MANIFEST).read_text()
    for name in (mel_shard_name(2), mel_shard_name(3)):
        assert np.array_equal(np.load(cut / name), np.load(whole / name))

    other = tmp_path / "other"
    shutil.copytree(whole, other)
    (other / MANIFEST).rename(other / (MANIFEST + ".partial"))
    with pytest.raises(ValueError, match="another plan"):
        build(other, S.generate(40), **{**options, "emotions": ["neutral", "happy"]})
    slt = json.loads((whole / SUMMARY).read_text())["voices"]["slt"]
    assert slt["teacher"] == FESTIVAL and slt["speaker"] == festival.HTS_SLT
    assert slt["pitch_variants"] == list(SLT.pitch_variants)
    assert any(e.semitones for e in corpus.entries)  # the variants joined the plan


@needs_flite
def test_teacher_round_trip_reports_both_modes(tmp_path: Path) -> None:
    pytest.importorskip("pocketsphinx")
    pytest.importorskip("soxr")
    from tts_triton.evaluate import teacher

    out = tmp_path / "teacher.md"
    assert teacher.main(["--sentences", "2", "--jobs", "1", "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    modes = result["voices"]["slt"]
    assert len(modes["driven"]["transcripts"]) == len(modes["plain"]["transcripts"]) == 2
    assert modes["driven"]["agreement"] >= modes["plain"]["agreement"] and 0 <= modes["driven"]["wer"] < 1
    assert "| slt |" in out.read_text()
    with pytest.raises(SystemExit):
        teacher.main(["--voices", "m1"])


def test_checkpoint_records_the_voices_it_learned() -> None:
    from tts_triton.training.runs import corpus_info

    summary = {"utterances": 3, "hours": 0.01, "espeak": "eSpeak NG 1.51", "flite": "flite-2.2",
               "agreement": {"utterances": 1, "mean": 1.0, "exact": 1.0}, "counts": {"voice": {"m1": 2, "slt": 1}},
               "build": {"seconds": 1.0}}
    info = corpus_info(summary)
    assert info["voices"] == {"m1": 2, "slt": 1} and info["flite"] == "flite-2.2" and "build" not in info
