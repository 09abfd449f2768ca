"""The natural voice as the default: the voices a checkpoint learned, the default-voice rule, the release's bank,
the evaluation's plan over teachers of two bands, the targets table and the samples command (fast, pure logic
or the tiny checkpoint; the release test renders a few clips with espeak-ng and flite)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from tts_triton.core.voices import from_styles
from tts_triton.data import flite
from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, PITCH_ORDER, VOICES
from tts_triton.evaluate import measures, quality_targets, run, samples
from tts_triton.export import voice_bank

needs_teachers = pytest.mark.skipif(shutil.which("flite") is None or shutil.which("espeak-ng") is None,
                                    reason="flite and espeak-ng must be on PATH")

#: how the reports name slt's teachers (flite for its emotions, festival's HTS voice for neutral speech)
SLT = "festival cmu_us_slt_arctic_hts"


def learned(ckpt: Any, **counts: int) -> Any:
    """``ckpt`` as if trained on a corpus with these per-voice utterance counts (trained, so that it ships)."""
    info = {**ckpt.info, "data": {"voices": counts}, "acoustic": {"steps": 1}, "vocoder": {"steps": 1}}
    return dataclasses.replace(ckpt, trained=True, info=info)


def test_a_checkpoint_knows_the_voices_its_corpus_counted(tiny_checkpoint: Any) -> None:
    assert tiny_checkpoint.voices == list(VOICES)  # no voice counts: espeak-ng's voices
    assert learned(tiny_checkpoint, slt=5, f1=3, m1=0, gone=2).voices == ["f1", "slt"]  # table order, counted only


def test_the_default_voice_is_the_natural_one_once_learned() -> None:
    assert voice_bank.choose_default_voice(list(CORPUS_VOICES), list(CORPUS_VOICES)) == "slt"
    assert voice_bank.choose_default_voice(list(CORPUS_VOICES), list(VOICES)) == "f1"  # slt never learned
    assert voice_bank.choose_default_voice(["m1", "f1"], list(CORPUS_VOICES)) == "f1"
    assert voice_bank.choose_default_voice(["m2", "m1"], ["m1", "m2"]) == "m2"
    assert voice_bank.choose_default_voice(["slt", "m1"], ["m1"]) == "m1"  # a learned voice before slt
    assert voice_bank.choose_default_voice(["slt"], []) == "slt"


def test_bank_default_follows_what_the_checkpoint_learned(tiny_checkpoint: Any) -> None:
    noise = np.random.default_rng(0).standard_normal(8192).astype(np.float32) * 0.1
    clips = {(v, e): [noise] for v in ("f1", "slt") for e in EMOTIONS}
    assert voice_bank.build_voice_bank(tiny_checkpoint, clips).default_voice == "f1"
    assert voice_bank.build_voice_bank(learned(tiny_checkpoint, f1=1, slt=1), clips).default_voice == "slt"
    assert voice_bank.build_voice_bank(learned(tiny_checkpoint, f1=1, slt=1), clips, "f1").default_voice == "f1"


def test_a_bank_gives_m8_a_share_of_slts_emotion_offsets_and_slt_a_pitch_axis(tiny_checkpoint: Any) -> None:
    rng = np.random.default_rng(1)
    clips = {(v, e): [rng.standard_normal(8192).astype(np.float32) * 0.1] for v in ("m8", "slt") for e in EMOTIONS}
    variants = {("slt", st): [rng.standard_normal(8192).astype(np.float32) * 0.1] for st in (-4.0, 4.0)}
    bank = voice_bank.build_voice_bank(tiny_checkpoint, clips, variants=variants)
    donor, gain = voice_bank.EMOTIONS_FROM["m8"]
    offset = bank.style(donor, "happy") - bank.style(donor, "neutral")
    assert donor == "slt" and 0.0 < gain <= 1.0
    assert np.allclose(bank.style("m8", "happy"), bank.style("m8", "neutral") + gain * offset, atol=1e-5)
    assert bank.info["emotions_from"] == {"m8": {"donor": "slt", "gain": gain}} and bank.pitch_span == 4.0
    assert list(bank.pitch_axes) == ["slt"] and len(bank.pitch_axes["slt"]) == len(bank.style("slt"))


@needs_teachers
def test_ship_builds_the_learned_voices_with_slt_the_default(tiny_checkpoint: Any, tmp_path: Path) -> None:
    from tts_triton.core.voices import VoiceBank
    from tts_triton.export import release

    ckpt = learned(tiny_checkpoint, f1=2, slt=2)
    bank = VoiceBank.load(release.ship(ckpt, tmp_path / "a" / "voice.pt", 1, None, "ship"))
    assert bank.voices == ["f1", "slt"] and bank.default_voice == "slt"
    assert not np.allclose(bank.style("slt", "neutral"), bank.style("f1", "neutral"))
    kept = VoiceBank.load(release.ship(ckpt, tmp_path / "b" / "voice.pt", 1, None, "ship", default_voice="f1"))
    assert kept.default_voice == "f1"
    with pytest.raises(ValueError, match="'m1' is not among"):
        release.ship(ckpt, tmp_path / "c" / "voice.pt", 1, None, "ship", default_voice="m1")
    with pytest.raises(SystemExit):
        release.main(["ship", "--checkpoint", "unused.pt", "--voices", "f1,nope"])


def test_twelve_voices_take_sixty_sentences_to_cover_every_pair() -> None:
    voices = list(CORPUS_VOICES)
    items = measures.select_items(run.min_sentences(voices), voices)
    assert run.min_sentences(voices) == 60
    assert sorted((i.voice, i.emotion) for i in items) == sorted((v, e) for v in voices for e in EMOTIONS)
    chosen = measures.emotion_items(items)
    assert list(dict.fromkeys(i.voice for i in chosen)) == voices  # every voice's emotion sentences, in order


def test_plan_measures_each_pair_in_the_narrower_band() -> None:
    work = run.EvaluationPlan.select(10, ["f1", "kal16"], ["f1", "kal16"])
    f1_item = next(i for i in work.items if i.voice == "f1" and i.emotion != "neutral")
    kal = next(i for i in work.items if i.voice == "kal16" and i.emotion != "neutral")
    band = flite.VOICE_RATE
    # the output against each voice: whole band against espeak-ng, flite's band against kal16 (already in it)
    assert [(b, r.voice.name, r.band) for b, r in work.own(f1_item)] == [(None, "f1", None), (band, "kal16", None)]
    # the teachers' own gap: espeak-ng's rendering band-limited to meet flite's
    assert [(a.voice.name, a.band, b.voice.name, b.band) for a, b in work.gap(f1_item)] == [("f1", band, "kal16", None)]
    assert [(a.voice.name, a.band, b.voice.name, b.band) for a, b in work.gap(kal)] == [("kal16", None, "f1", band)]
    assert {(f1_item, None), (f1_item, band), (kal, None), (kal, band)} <= set(work.synthesized())
    refs = work.references()
    assert len(refs) == len(set(refs)) and run.target_reference(f1_item).in_band(band) in refs
    for whole_band in (["f1", "m1"], ["f1", "slt"]):  # espeak-ng and festival's HTS voice both fill the band
        plan = run.EvaluationPlan.select(10, whole_band, whole_band)
        assert [b for _, b in plan.synthesized()] == [None] * len(plan.synthesized()) != []
        assert [r.band for r in plan.references()] == [None] * len(plan.references()) != []


def test_reference_keys_keep_espeak_ngs_cache_and_tell_teachers_and_bands_apart() -> None:
    versions = {"espeak-ng": "1.51", "flite": "2.2", "festival": "2.5.0"}
    e = EMOTIONS["happy"]
    f1 = run.Reference("Hi there.", CORPUS_VOICES["f1"], e)
    old = (versions["espeak-ng"], "en-us+f1", e.pitch, e.range, e.rate, e.amplitude, "Hi there.",
           measures.FEATURE_SETTINGS)
    assert f1.key(versions) == hashlib.sha256(repr(old).encode()).hexdigest()[:32]  # the features cached so far
    slt = run.Reference("Hi there.", CORPUS_VOICES["slt"], e)  # festival's HTS engine, under its own controls
    slt_neutral = run.Reference("Hi there.", CORPUS_VOICES["slt"], EMOTIONS["neutral"])
    kal16 = run.Reference("Hi there.", CORPUS_VOICES["kal16"], e)  # flite: its band
    keys = {f1.key(versions), f1.in_band(flite.VOICE_RATE).key(versions), slt.key(versions), slt_neutral.key(versions),
            slt_neutral.in_band(flite.VOICE_RATE).key(versions), kal16.key(versions)}
    assert len(keys) == 6 and kal16.in_band(flite.VOICE_RATE) == kal16


def _evaluation(voices: list[str], default_voice: str) -> run.Evaluation:
    """An evaluation of made-up numbers: each voice's output 3 dB from its own rendering, 6 dB from the others',
    except one slt sentence that hit the max-steps guard and sits nearer f1."""
    items = measures.select_items(len(voices) * 5, voices)
    utts = []
    for k, item in enumerate(items):
        mcds = {v: 3.0 if v == item.voice else 6.0 for v in voices}
        stuck = item.voice == "slt" and k % 5 == 0
        if stuck:
            mcds["f1"] = 2.0
        utts.append(run.ScoredUtterance(item, 1.5, stuck, mcds, 5.0))
    rising = {e: 100.0 + 20 * n for n, e in enumerate(PITCH_ORDER)}
    f0 = {source: {v: dict(rising) for v in voices} for source in ("synthesized", "vocoder copy", "teacher")}
    f0["synthesized"]["f1"]["sad"] = 500.0
    sanity = {label: [2.0, 3.0] for label, *_ in run.SANITY}
    return run.Evaluation("python -m tts_triton.evaluate", "default", True, "0" * 16, {}, "bank.json", voices,
                          voices, default_voice, utts, f0, [3.0], sanity, sanity, {"synthesis": 1.0},
                          {"mel": "mel.png", "alignment": "alignment.png", "f0": "f0.png"}, [])


def test_report_has_a_row_per_voice_and_judges_the_default_voice() -> None:
    from tts_triton.evaluate.report import report, results_json

    ev = _evaluation(["f1", "slt"], "slt")
    data = results_json(ev)
    assert data["default_voice"] == "slt" and data["voices"] == ["f1", "slt"]
    assert data["per_voice"]["slt"] == {"teacher": "festival", "sentences": 5, "median_mcd_db": 3.0,
                                       "identity_pct": 80.0, "stop_failures": 1, "emotion_order": True}
    assert data["per_voice"]["f1"]["emotion_order"] is False
    text = report(ev, {"sentences": ["a"] * 60, "mean_wer": {"model": {"slt": 0.15}, "teacher": {"slt": 0.13}},
                       "median_mcd_db": {"slt": 4.4}})
    assert f"| slt | {SLT} | 5 | 3.00 | 5.00 | 4 / 5 | 1 |" in text
    assert "| f1 | espeak-ng en-us+f1 | 5 | 3.00 |" in text and "its default voice: **slt**" in text
    assert "| default voice: ASR WER, mean over the held-out sentences | 0.150 (60 sentences) | <= 0.20 | **pass** |" \
        in text
    assert "| default voice: MCD to the teacher, test split, median | 3.00 dB (5 sentences) | <= 4.5 dB | **pass** |" \
        in text
    assert "| default voice: WER / teacher's WER | 1.15 | <= 1.25 | **pass** |" in text
    assert "| stop failures (hit the max-steps guard) | 1 / 10 = 10.0 % | <= 1 % | FAIL |" in text
    assert "| emotions ordered by mean F0, test split | 1 / 2 voices = 50 % | >= 80 % of voices | FAIL |" in text


def test_targets_table_sets_two_evaluations_side_by_side(tmp_path: Path) -> None:
    from tts_triton.evaluate.report import results_json

    before = {"sentences": ["a"] * 60, "mean_wer": {"model": {"f1": 0.48, "f5": 0.31},
                                                     "espeak-ng": {"f1": 0.81, "f5": 0.39}}}  # an older round trip
    after = {"sentences": ["a"] * 60, "default_voice": "slt", "median_mcd_db": {"slt": 4.76},
             "mean_wer": {"model": {"slt": 0.193, "f1": 0.41, "f5": 0.40}, "teacher": {"slt": 0.128}},
             "emotions": {"ordered": {"model": {"slt": True}}}}
    full = results_json(_evaluation(["f1", "slt"], "slt"))
    paths = {}
    for name, data in (("before", before), ("after", after), ("full", full)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(data))
    out = tmp_path / "table.md"
    assert quality_targets.main(["--before", str(paths["before"]), "--before-voice", "f1",
                         "--after", str(paths["after"]), str(paths["full"]), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| default voice | f1 | slt |" in text
    assert f"| default voice: its teacher's ASR WER, same sentences | 0.810 (espeak-ng en-us+f1) | 0.128 ({SLT})" \
        in text
    assert "| default voice: WER / teacher's WER | 0.59 | 1.51 | <= 1.25 | FAIL |" in text
    assert "| default voice: MCD to the teacher, held-out sentences, median | not measured | 4.76 dB | <= 4.5 dB |" \
        " FAIL" in text
    assert "| voice identity (the nearest of the voices' renderings is the target's) | not measured | 9 / 10 = 90 %" \
        in text
    assert "| ASR WER of f1, not the default voice after | 0.480 | 0.410 |" in text and "**pass** |\n| ASR WER of f5" \
        in text
    assert text.count("| ASR WER of f5, not the default voice after | 0.310 | 0.400 |") == 1 and text.count("FAIL") == 5
    alone = "\n".join(quality_targets.table(quality_targets.load([paths["after"]])))
    assert "| default voice: ASR WER, mean over the held-out sentences | 0.193 (60 sentences) | <= 0.20 | **pass** |" \
        in alone
    assert "| stop failures (hit the max-steps guard) | not measured |" in alone
    with pytest.raises(SystemExit):
        quality_targets.main(["--after", str(tmp_path / "missing.json")])


def test_samples_of_the_banks_default_voice(tiny_checkpoint: Any, test_style: Any, tmp_path: Path) -> None:
    style = test_style[: tiny_checkpoint.config.style.dim]
    bank = from_styles({(v, e): style * (1.0 + 0.1 * k) for v in ("f1", "slt") for k, e in enumerate(EMOTIONS)},
                       "slt", "neutral")
    (tmp_path / "before-old-neutral-00.wav").write_bytes(b"")  # the label's earlier files go, others stay
    (tmp_path / "after-x.wav").write_bytes(b"")
    written = samples.write_samples(tiny_checkpoint, bank, bank.default_voice, ["neutral", "sad"], 1, "before",
                                    tmp_path)
    assert [s.file for s in written] == ["before-slt-neutral-00.wav", "before-slt-sad-00.wav"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after-x.wav", *(s.file for s in written)]
    data, rate = soundfile.read(tmp_path / written[0].file)
    assert rate == 22050 and len(data) / rate == pytest.approx(written[0].seconds, abs=1e-3)
    text = samples.index(written, "before", "default", "bank.json", "python -m tts_triton.evaluate.samples")
    assert "| [before-slt-sad-00.wav](before-slt-sad-00.wav) | slt | sad |" in text
    from tts_triton.errors import InvalidInput

    with pytest.raises(InvalidInput, match="EMOTION"):
        samples.write_samples(tiny_checkpoint, bank, "slt", ["bored"], 1, "before", tmp_path)
