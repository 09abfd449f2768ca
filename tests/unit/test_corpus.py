"""The synthetic corpus: sentences, prosody table, a tiny rendered dataset and the training datasets."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from tts_triton.core import audio
from tts_triton.core.symbols import BOS_ID, EOS_ID, N_SYMBOLS, PAD_ID
from tts_triton.data import sentences as S
from tts_triton.data.corpus import build, conditions, plan
from tts_triton.data.dataset import AcousticDataset, Corpus, VocoderDataset, collate_acoustic
from tts_triton.data.prosody import (
    CORPUS_VOICES,
    EMOTIONS,
    PITCH_ORDER,
    VOICES,
    espeak_args,
    render,
    ssml,
    trim_silence,
)

espeak_ng = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not on PATH")


@pytest.fixture(scope="module")
def sentences() -> list[S.CorpusSentence]:
    return S.generate()


def test_sentences_are_many_distinct_varied_and_deterministic(sentences: list[S.CorpusSentence]) -> None:
    assert len(sentences) >= 4000
    assert len({s.text.lower() for s in sentences}) == len(sentences)
    words = [len(s.text.split()) for s in sentences]
    assert min(words) >= 3 and max(words) <= 30 and np.mean(words) > 8
    assert sum(s.text.endswith("?") for s in sentences) > 400
    assert sum(s.text.endswith("!") for s in sentences) > 200
    assert sum(";" in s.text for s in sentences) > 200
    assert sum(any(c.isdigit() for c in s.text) for s in sentences) > 200
    # Pinned: the same text on every machine and Python version (the generator is pure integer arithmetic).
    assert S.fingerprint(sentences) == "481ccfd964d578af"
    assert S.generate(50, seed=7) == S.generate(50, seed=7) != S.generate(50, seed=8)


def test_split_is_by_sentence_and_file_round_trips(sentences: list[S.CorpusSentence], tmp_path: Path) -> None:
    splits = Counter(s.split for s in sentences)
    assert splits["test"] >= 100 and splits["val"] >= 100 and splits["train"] >= 0.85 * len(sentences)
    texts = {split: {s.text for s in sentences if s.split == split} for split in S.SPLITS}
    assert not (texts["train"] & texts["val"]) and not (texts["train"] & texts["test"]) and not (
        texts["val"] & texts["test"])
    S.write_sentences(sentences[:30], tmp_path / "s.tsv")
    assert S.read_sentences(tmp_path / "s.tsv") == sentences[:30]


def test_prosody_table_is_complete() -> None:
    assert len(VOICES) >= 8
    assert {v.gender for v in VOICES.values()} == {"male", "female"}
    assert set(EMOTIONS) == {"neutral", "happy", "sad", "angry", "surprised"}
    assert PITCH_ORDER.index("sad") < PITCH_ORDER.index("neutral") < PITCH_ORDER.index("happy") < PITCH_ORDER.index(
        "surprised")
    for e in EMOTIONS.values():
        assert 0 <= e.pitch <= 99 and e.range > 0 and 80 <= e.rate <= 450 and 0 < e.amplitude <= 200
    args = espeak_args(VOICES["f2"], EMOTIONS["sad"])
    assert args[args.index("-v") + 1] == "en-us+f2" and args[args.index("-p") + 1] == "25"
    expected = '<speak><prosody range="160%">Tom &amp; &lt;Jerry&gt;</prosody></speak>'
    assert ssml("Tom & <Jerry>", EMOTIONS["happy"]) == expected


def test_trim_silence_keeps_margins_and_hop_multiple() -> None:
    x = np.zeros(22050, np.float32)
    x[5000:9000] = 0.5
    y = trim_silence(x)
    assert len(y) % audio.HOP_LENGTH == 0 and 4000 <= len(y) <= 4000 + 2 * 1102 + 2 * audio.HOP_LENGTH
    assert np.abs(y[:800]).max() == 0 and np.abs(y).max() == 0.5


def test_plan_covers_every_voice_for_test_sentences(sentences: list[S.CorpusSentence]) -> None:
    utterances = plan(sentences[:400])
    test = [u for u in utterances if u.split == "test"]
    for sentence_id in {u.sentence_id for u in test}:
        mine = [u for u in test if u.sentence_id == sentence_id]
        assert sorted(u.voice for u in mine) == sorted(CORPUS_VOICES) and len({u.emotion for u in mine}) == 1
    train = Counter(u.condition for u in utterances if u.split == "train")
    assert set(train) == set(conditions(list(CORPUS_VOICES), list(EMOTIONS)))  # emotions and pitch variants
    share = [n / CORPUS_VOICES[voice].weight for (voice, _, _), n in train.items()]  # in proportion to weight
    assert max(share) - min(share) <= 1
    assert len({u.id for u in utterances}) == len(utterances)


@espeak_ng
def test_render_orders_pitch_by_emotion() -> None:
    pyworld = pytest.importorskip("pyworld")
    text = "The children watched the boats sail slowly past the old lighthouse."
    for voice in ("m1", "f2"):
        f0 = []
        for name in PITCH_ORDER:
            x = render(text, VOICES[voice], EMOTIONS[name]).astype(np.float64)
            track, times = pyworld.dio(x, audio.SAMPLE_RATE, f0_floor=50.0, f0_ceil=800.0)
            track = pyworld.stonemask(x, track, times, audio.SAMPLE_RATE)
            f0.append(track[track > 0].mean())
            assert len(x) % audio.HOP_LENGTH == 0
            assert np.abs(x).max() == pytest.approx(0.5 * EMOTIONS[name].amplitude / 100, rel=1e-3)
        assert f0 == sorted(f0), f"{voice}: mean F0 {f0} not rising along {PITCH_ORDER}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng not on PATH")
    root = tmp_path_factory.mktemp("corpus")
    build(root, S.generate(40), jobs=1, limit=24, voices=["m1", "f2"], emotions=["neutral", "happy"],
          shard_utterances=10, progress=False)
    return root


def test_tiny_build_is_consistent(tiny: Path) -> None:
    summary = json.loads((tiny / "dataset.json").read_text())
    lines = [json.loads(line) for line in (tiny / "manifest.jsonl").read_text().splitlines()]
    assert summary["utterances"] == len(lines) == 24 and summary["shards"] == 3
    assert set(summary["counts"]["split"]) == {"train", "val", "test"}
    corpus = Corpus(tiny)
    for e in corpus.entries:
        assert e.n_frames == e.n_samples // audio.HOP_LENGTH and e.n_samples % audio.HOP_LENGTH == 0
        assert e.mel_offset == e.offset // audio.HOP_LENGTH
        assert corpus.audio(e).shape == (e.n_samples,) and corpus.audio(e).dtype == np.int16
        assert corpus.mel(e).shape == (e.n_frames, audio.N_MELS) and corpus.mel(e).dtype == np.float16
        assert e.ids[0] == BOS_ID and e.ids[-1] == EOS_ID and all(0 < i < N_SYMBOLS for i in e.ids)
        assert e.id == f"{e.sentence_id}-{e.voice}-{e.emotion}"
    e = corpus.entries[5]
    mel = audio.mel_spectrogram(corpus.float_audio(e))
    assert np.abs(mel - corpus.mel(e).astype(np.float32)).max() < 0.02  # float16 rounding only


def test_acoustic_dataset_and_collate(tiny: Path) -> None:
    ds = AcousticDataset(tiny, "train", seed=3)
    refs = set()
    for epoch in range(3):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            item = ds[i]
            ref = ds.entries[ds.reference_index(i)]
            assert item["ref_id"] == ref.id != item["id"]
            assert (ref.voice, ref.emotion, ref.split) == (item["voice"], item["emotion"], "train")
            refs.add((i, item["ref_id"]))
    assert len(refs) > len(ds)  # references change between epochs
    ds.set_epoch(1)
    assert [ds[i]["ref_id"] for i in range(4)] == [ds[i]["ref_id"] for i in range(4)]  # and are reproducible

    batch = collate_acoustic([ds[i] for i in range(4)], frames_multiple=2)
    lengths, frames = batch["mel_lengths"], batch["mel"].shape[1]
    assert batch["ids"].dtype == torch.long and batch["ids"].shape == (4, int(batch["id_lengths"].max()))
    assert batch["mel"].shape == (4, frames, audio.N_MELS) and frames % 2 == 0 and frames >= int(lengths.max())
    for b in range(4):
        n, t = int(lengths[b]), int(batch["id_lengths"][b])
        assert (batch["ids"][b, t:] == PAD_ID).all()
        assert (batch["mel"][b, n:] == audio.SILENCE_LOG_MEL).all()
        assert batch["stop"][b, : n - 1].sum() == 0 and (batch["stop"][b, n - 1 :] == 1).all()
        assert batch["ref_mel"].shape[1] == int(batch["ref_lengths"].max())
    assert batch["voice"] == [ds[i]["voice"] for i in range(4)]


def test_vocoder_dataset_segments_align(tiny: Path) -> None:
    corpus = Corpus(tiny)
    ds = VocoderDataset(corpus, "train", segment_frames=16, seed=1)
    for i in range(len(ds)):
        mel, x = ds[i]
        assert mel.shape == (16, audio.N_MELS) and x.shape == (16 * audio.HOP_LENGTH,)
        assert mel.dtype == x.dtype == torch.float32
    mel, x = ds[0]
    whole_mel, whole_x = VocoderDataset(corpus, "train", segment_frames=None)[0]
    start = int(np.argmin([float((whole_mel[s : s + 16] - mel).abs().sum()) for s in range(len(whole_mel) - 15)]))
    assert torch.equal(whole_x[start * audio.HOP_LENGTH : (start + 16) * audio.HOP_LENGTH], x)
    long = VocoderDataset(corpus, "train", segment_frames=100_000)[0]
    assert long[0].shape[0] == 100_000 and long[1].abs()[-1000:].max() == 0
