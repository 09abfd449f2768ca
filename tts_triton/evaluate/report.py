"""The evaluation's report: its Markdown, its figures, its WAV samples and its JSON."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.data.prosody import CORPUS_VOICES, PITCH_ORDER
from tts_triton.evaluate.measures import (
    EMOTION_SENTENCES_PER_VOICE,
    ENERGY_FLOOR_DB,
    F0_CEIL_HZ,
    F0_FLOOR_HZ,
    FRAME_PERIOD_MS,
    MCEP_ALPHA,
    MCEP_ORDER,
    emotion_order,
    percent,
)
from tts_triton.evaluate.quality_targets import Results, table
from tts_triton.evaluate.run import SANITY, SANITY_MALE_FEMALE_DB, Evaluation, default_cache


def _info_summary(info: Mapping[str, Any]) -> str:
    """Scalars of the checkpoint's ``info`` and the steps, epochs and data size inside its sections."""
    parts = []
    for key, value in sorted(info.items()):
        if isinstance(value, dict):
            facts = [f"{k} {v}" for k, v in value.items()
                     if k in ("steps", "epochs", "utterances", "hours") and isinstance(v, int | float)]
            parts += [f"{key}: {', '.join(facts)}"] if facts else []
        elif isinstance(value, str | int | float):
            parts.append(f"{key}: {value}")
    return "; ".join(parts) or "none"


def _hz(value: float | None) -> str:
    return "-" if value is None or np.isnan(value) else f"{value:.0f}"


def report(ev: Evaluation, asr: dict[str, Any] | None = None) -> str:
    """The Markdown report of an evaluation (and of the round trip's JSON ``asr``, for the targets table)."""
    from tts_triton.models.checkpoint import UNTRAINED_LABEL  # imports torch (the model extra), see evaluate()

    utts = ev.utterances
    target_mcd = np.array([u.mcds[u.item.voice] for u in utts])
    orders = {source: emotion_order(f0) for source, f0 in ev.emotion_f0.items()}
    synth_order = orders["synthesized"]
    results = Results()
    results.add(results_json(ev) | ({"asr": asr} if asr else {}))
    lines = ["# Evaluation of a checkpoint against its teachers", ""]
    if not ev.trained:
        lines += [f"> **{UNTRAINED_LABEL}.** This run proves the evaluation pipeline end to end; the numbers "
                  "measure an untrained network, not the model.", ""]
    lines += [
        f"- checkpoint: **{ev.checkpoint}**, trained: **{ev.trained}**, weights fingerprint `{ev.fingerprint}`",
        f"- checkpoint info: {_info_summary(ev.info)}",
        f"- voice bank: {ev.voice_bank}; its default voice: **{ev.default_voice}**",
        f"- voices synthesized: {', '.join(ev.voices)}; identity decided among {', '.join(ev.identity_voices)}",
        f"- generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPU cores by",
        "", f"      {ev.command}", "",
        "## Results", "",
        *table(results),
        "",
        f"MCD-DTW against the target voice's teacher: mean {target_mcd.mean():.2f} dB, 10th-90th percentile "
        f"{np.percentile(target_mcd, 10):.2f}-{np.percentile(target_mcd, 90):.2f} dB. " + _scale(ev),
        "",
        "**Vocoder alone** (diagnostic, no goal): the teacher's log-mel of the emotion sentences (below) through "
        "the checkpoint's vocoder (its generator and the mel match), without the acoustic model, measures a "
        "median MCD-DTW of "
        f"{np.median(ev.copy_mcd):.2f} dB against the rendering itself, and its F0 follows the emotion order for "
        f"{percent(orders['vocoder copy']):.0f} % of the voices. The full system cannot do better than its vocoder.",
        "",
        "### Per voice", "",
        f"Emotion sentences: each voice's {EMOTION_SENTENCES_PER_VOICE} shortest test sentences, synthesized in all "
        "five emotions. Mean F0 in Hz "
        f"({' / '.join(PITCH_ORDER)}) of the synthesized audio, of the vocoder alone on the teacher's mel, and of "
        "the teacher's rendering. *Teacher gap*: the median MCD from the voice's own rendering to the nearest "
        "other voice's (same sentence and emotion); an output is only reliably identified when its MCD stays well "
        "under that gap.", "",
        "| voice | teacher | sentences | median MCD (dB) | teacher gap (dB) | identity | stop failures "
        "| F0 synthesized | F0 vocoder alone | F0 teacher | order |", "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for voice in ev.voices:
        mine = ev.of_voice(voice)
        if not mine:
            continue
        f0s = [" / ".join(_hz(ev.emotion_f0[source].get(voice, {}).get(e)) for e in PITCH_ORDER) for source in
               ("synthesized", "vocoder copy", "teacher")]
        teacher = CORPUS_VOICES[voice]
        lines.append(f"| {voice} | {teacher.teacher_name} | {len(mine)} | "
                     f"{np.median([u.mcds[voice] for u in mine]):.2f} | "
                     f"{np.median([u.teacher_gap for u in mine]):.2f} | "
                     f"{sum(u.identity_ok for u in mine)} / {len(mine)} | {sum(u.hit_max_steps for u in mine)} | "
                     f"{' | '.join(f0s)} | {'yes' if synth_order.get(voice) else 'no'} |")
    lines += ["", f"The teachers' own renderings follow the order for {percent(orders['teacher']):.0f} % of the "
              "voices.", "",
              "### Per emotion", "", "| emotion | sentences | median MCD (dB) | identity |", "|---|---|---|---|"]
    for emotion in PITCH_ORDER:
        mine = [u for u in utts if u.item.emotion == emotion]
        if mine:
            lines.append(f"| {emotion} | {len(mine)} | {np.median([u.mcds[u.item.voice] for u in mine]):.2f} | "
                         f"{sum(u.identity_ok for u in mine)} / {len(mine)} |")
    nearest = {v: sum(u.nearest == v for u in utts) for v in ev.identity_voices}
    lines += ["", "How often each voice was the nearest: " + ", ".join(f"{v} {c}" for v, c in nearest.items()) + ".",
              ""]
    lines += _sanity_section(ev) + _method_section(ev) + _figures_section(ev) + _per_sentence_section(ev)
    lines += ["## Run time", "", "| stage | s |", "|---|---|"]
    lines += [f"| {stage} | {seconds:.0f} |" for stage, seconds in ev.timings.items()]
    lines += ["", "Later runs read the teachers' features from the cache (see Method).", ""]
    return "\n".join(lines)


def _sanity_mean(ev: Evaluation, label: str, all_frames: bool = False) -> float:
    return float(np.mean((ev.sanity_all_frames if all_frames else ev.sanity)[label]))


def _female_labels() -> list[str]:
    return [label for label, voice, _, _ in SANITY if voice.gender == "female"]


def _scale(ev: Evaluation) -> str:
    rate, other = SANITY[0][0], SANITY[1][0]
    female = np.mean([_sanity_mean(ev, label) for label in _female_labels()])
    return (f"For scale, the same measure gives {_sanity_mean(ev, rate):.1f} dB between espeak-ng's en-us at two "
            f"speaking rates, {_sanity_mean(ev, other):.1f} dB between en-us and en-us+m3 and {female:.1f} dB "
            "between en-us and its female variants (sanity check below).")


def _sanity_section(ev: Evaluation) -> list[str]:
    female = _female_labels()
    sentences = len(ev.sanity[SANITY[0][0]])
    lines = ["## Sanity check of the MCD implementation", "",
             f"espeak-ng's `en-us` voice at its defaults (`-p 50 -s 175`, range 100 %) against other renderings of the "
             f"first {sentences} test sentences, through the same renderer (`prosody.render`: silence trimmed "
             "to 50 ms, peak normalised), features and DTW as the evaluation. The last column keeps every frame "
             "instead of dropping the low-energy ones.", "",
             "| en-us against | MCD-DTW (dB), mean | per sentence | the published value | every frame kept |",
             "|---|---|---|---|---|"]
    for label, _, _, published in SANITY:
        lines.append(f"| {label} | {_sanity_mean(ev, label):.2f} | {', '.join(f'{v:.2f}' for v in ev.sanity[label])} "
                     f"| {'' if published is None else f'about {published}'} | {_sanity_mean(ev, label, True):.2f} |")
    mean_female = float(np.mean([_sanity_mean(ev, label) for label in female]))
    mean_female_all = float(np.mean([_sanity_mean(ev, label, True) for label in female]))
    lines += [f"| male vs female: mean of the {len(female)} female variants | {mean_female:.2f} | | "
              f"about {SANITY_MALE_FEMALE_DB} | {mean_female_all:.2f} |", ""]
    pairs = [(_sanity_mean(ev, label), published) for label, _, _, published in SANITY if published is not None]
    worst = max(abs(m / published - 1.0) for m, published in [*pairs, (mean_female, SANITY_MALE_FEMALE_DB)])
    lines += [f"The three values are within {100 * worst:.0f} % of the published ones. Dropping low-energy frames "
              "raises the same-voice values a little: the near-silent frames at the ends of the trimmed renderings "
              "match well, so keeping them pulls the mean down. Male vs female depends on the variant: "
              + ", ".join(f"{label.split()[0]} {_sanity_mean(ev, label):.1f}" for label in female)
              + " dB.", ""]
    return lines


def _method_section(ev: Evaluation) -> list[str]:
    n = len(ev.voices)
    return [
        "## Method", "",
        f"- **Sentences**: the first N sentences of the corpus's test split (`sentences.generate()`, every 20th "
        "sentence; never trained on). Sentence j is said in emotion `EMOTIONS[j % 5]` (the corpus's emotion for it) "
        f"and voice `voices[(j // 5) % {n}]` of the {n} voices synthesized (`--voices`, by default the ones the "
        f"checkpoint learned), so {5 * n} sentences cover every voice x emotion pair once.",
        "- **Clip**: the in-process reference synthesizer, `Pipeline(TorchBackend(ckpt.stages(), cfg), cfg)`, "
        "text through `text_to_sequences`, style = the voice bank's preset for (voice, emotion). Same decode loop, "
        "stop rule and chunked vocoding as the Triton server.",
        "- **Reference**: `prosody.render(text, voice, emotion)`, the teacher's rendering the corpus was built from "
        "(espeak-ng, or flite for its voices).",
        "- **Band**: flite speaks at 16 kHz, so its renderings are empty above 8 kHz; every MCD between two clips is "
        "taken in the narrower band of the two (the wider one through `asr.band_limit` first), as in the round trip.",
        f"- **Features**: WORLD `harvest` F0 ({F0_FLOOR_HZ:.0f}-{F0_CEIL_HZ:.0f} Hz) and `cheaptrick` envelope "
        f"every {FRAME_PERIOD_MS:.0f} ms (pyworld), `pysptk.sp2mc(envelope, order={MCEP_ORDER}, alpha={MCEP_ALPHA})`. "
        f"c0 is excluded. Frames whose envelope energy (10 log10 of its sum over frequency) is more than "
        f"{ENERGY_FLOOR_DB:.0f} dB below the utterance's loudest frame are dropped (the same 40 dB the corpus uses "
        "to trim silence), in each utterance before alignment.",
        "- **MCD-DTW**: DTW (numpy, `evaluate.measures.dtw`) over the Euclidean distances of c1..c24 with steps (1,0), "
        "(0,1), "
        "(1,1), no slope weights; MCD = (10 / ln 10) sqrt(2 sum_d (mc_a - mc_b)^2), averaged over the frame pairs "
        "of the path.",
        f"- **Voice identity**: the output's MCD against the renderings of the same sentence and emotion in the "
        f"{len(ev.identity_voices)} voices the checkpoint learned (and any other synthesized); correct when the "
        "target voice's is strictly the lowest.",
        "- **Stop failures**: `Pipeline.stats[i].hit_max_steps` for any sentence piece "
        "(guard: `DecoderConfig.max_steps(tokens)` decoder steps).",
        f"- **Emotion**: each voice's {EMOTION_SENTENCES_PER_VOICE} shortest test sentences are synthesized in all "
        "five emotions (the same texts, so only the emotion changes); a voice passes when the mean harvest F0 over "
        "the voiced frames of those sentences rises strictly along `prosody.PITCH_ORDER`. (With one sentence per "
        "voice, espeak-ng's own renderings failed for f1 on the default 50 sentences.)",
        "- **Vocoder alone**: `audio.mel_spectrogram` of the teacher's rendering of each emotion sentence through the "
        "checkpoint's vocoder (`VocoderStage.vocode`: its generator and the mel match; no acoustic model, no "
        "postnet), measured like the synthesized audio.",
        f"- **Cache**: features of the teachers' renderings are stored in `{_home(default_cache())}` keyed by text, "
        "voice, prosody, the teacher's version, the feature settings and the band.",
        "",
    ]


def _home(path: Path) -> str:
    return str(path).replace(str(Path.home()), "~")


def _figures_section(ev: Evaluation) -> list[str]:
    lines = ["## Figures and samples", "",
             f"![mel spectrograms](eval/{ev.plots['mel']})", "",
             f"![attention alignment](eval/{ev.plots['alignment']})", "",
             f"![F0 contours per emotion](eval/{ev.plots['f0']})", "",
             "The figures show the first voice's shortest sentence; the F0 plot has it in every emotion, synthesized, "
             "through the vocoder alone and from its teacher.", "",
             "Samples (16-bit mono WAV, 22.05 kHz): the shortest outputs with distinct voices and emotions.", ""]
    lines += [f"- [samples/{name}](samples/{name}): {item.voice}, {item.emotion}, {seconds:.1f} s: \"{item.text}\""
              for name, item, seconds in ev.samples]
    return [*lines, ""]


def _per_sentence_section(ev: Evaluation) -> list[str]:
    lines = ["## Per sentence", "",
             "| id | voice | emotion | s | max steps | MCD (dB) | nearest | next-best voice MCD | text |",
             "|---|---|---|---|---|---|---|---|---|"]
    for u in ev.utterances:
        others = min(v for k, v in u.mcds.items() if k != u.item.voice)
        lines.append(f"| {u.item.sentence_id} | {u.item.voice} | {u.item.emotion} | {u.seconds:.1f} | "
                     f"{'hit' if u.hit_max_steps else ''} | {u.mcds[u.item.voice]:.2f} | {u.nearest} | {others:.2f} | "
                     f"{u.item.text} |")
    return [*lines, ""]


def results_json(ev: Evaluation) -> dict[str, Any]:
    """The numbers of an evaluation as JSON-ready data."""
    return {
        "checkpoint": ev.checkpoint, "trained": ev.trained, "fingerprint": ev.fingerprint, "command": ev.command,
        "median_mcd_db": ev.median_mcd, "identity_pct": ev.identity_pct, "stop_failures": ev.stop_failures,
        "stop_failure_pct": ev.stop_failure_pct, "emotion_order_pct": ev.emotion_pct,
        "voices": ev.voices, "identity_voices": ev.identity_voices, "default_voice": ev.default_voice,
        "per_voice": {v: _voice_json(ev, v) for v in ev.voices if ev.of_voice(v)},
        "sanity_mcd_db": {label: _sanity_mean(ev, label) for label, *_ in SANITY},
        "sanity_mcd_db_every_frame": {label: _sanity_mean(ev, label, True) for label, *_ in SANITY},
        "vocoder_alone_median_mcd_db": float(np.median(ev.copy_mcd)),
        "emotion_mean_f0_hz": ev.emotion_f0,
        "utterances": [{"id": u.item.sentence_id, "voice": u.item.voice, "emotion": u.item.emotion,
                        "seconds": round(u.seconds, 3), "hit_max_steps": u.hit_max_steps,
                        "mcd_db": {k: round(v, 3) for k, v in u.mcds.items()},
                        "teacher_gap_db": round(u.teacher_gap, 3)} for u in ev.utterances],
    }


def _voice_json(ev: Evaluation, voice: str) -> dict[str, Any]:
    mine = ev.of_voice(voice)
    return {"teacher": CORPUS_VOICES[voice].teacher, "sentences": len(mine),
            "median_mcd_db": float(np.median([u.mcds[voice] for u in mine])),
            "identity_pct": 100.0 * float(np.mean([u.identity_ok for u in mine])),
            "stop_failures": sum(u.hit_max_steps for u in mine),
            "emotion_order": bool(emotion_order(ev.emotion_f0["synthesized"]).get(voice, False))}
