"""Expressive and natural at once: every emotion and pitch shift of a voice, stage by stage, through the judges.

    python -m tts_triton.evaluate.expressive [--checkpoint CKPT] [--voice-bank BANK] [--voices slt,m8]
        [--sentences 30] [--stage-sentences 10] [--no-pitch] [--jobs 2] [--samples DIR]
        [--device cuda --save-clips DIR | --clips DIR] [--out docs/records/eval/expressive.md]

Conditions: each of ``--voices`` in each emotion, and each voice's neutral speech at :data:`PITCH_SHIFTS` (the pitch
control, asked as a request's ``PITCH``). Stages, to find where naturalness is lost:

- **teacher**: the voice's corpus teacher rendering the condition (festival's HTS voice under the HTS engine's own
  controls for ``slt``, espeak-ng for its voices; a teacher that cannot move its pitch renders no pitch row);
- **copy**: the served vocoder (mel match on) on the teacher's log-mel;
- **model**: the in-process synthesizer as served: the voice bank's preset, the pitch control through the
  pipeline (along the voice's pitch axis where it has one, :meth:`~tts_triton.core.voices.VoiceBank.pitch_style`);
  with ``--url``, the served ``tts`` model itself over gRPC (its audio brought back to SAMPLE_RATE).

The model speaks the first ``--sentences`` held-out sentences (:mod:`~tts_triton.evaluate.heldout`), the teacher and
copy stages the first ``--stage-sentences`` of them. Each clip gets DistillMOS, DNSMOS P.835 and Whisper tiny.en
(:mod:`~tts_triton.evaluate.judges`), PocketSphinx, its voiced F0 (WORLD harvest) and its length. The report's table
gives per condition and stage the mean DistillMOS (± standard error), DNSMOS OVRL, both WERs, the median F0 and the
spread of log F0 (semitones) over all voiced frames, and the mean length; then the bars of :data:`BARS` checked on
the model's rows. ``--samples`` writes the model's clips of the first two sentences as 16-bit WAVs.

The model's synthesis and the judges can run on different hosts: ``--save-clips`` synthesizes the model's clips
(``--device cuda`` on a GPU host, which has no judges) into a folder, at the judges' 16 kHz, and stops; ``--clips``
then judges those clips instead of synthesizing them (the conditions and sentences must match).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.core import audio
from tts_triton.data.prosody import NEUTRAL
from tts_triton.evaluate.asr import hear, wer
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES, add_judged_run_options
from tts_triton.evaluate.judges import JUDGE_RATE, to_judge_rate
from tts_triton.evaluate.measures import process_pool, standard_error
from tts_triton.evaluate.pitch import harvest
from tts_triton.jobs.progress import ProgressLine
from tts_triton.jobs.tables import markdown_table

TEACHER, COPY, MODEL = "teacher", "copy", "model"
#: The pitch control's shifts measured (semitones).
PITCH_SHIFTS = (4.0, -4.0)


@dataclass(frozen=True)
class Condition:
    """A voice in an emotion, ``semitones`` higher by the pitch control."""

    voice: str
    emotion: str
    semitones: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.voice} {self.emotion}" + (f" {self.semitones:+g} st" if self.semitones else "")


#: The bars the model's rows are held to: naturalness, intelligibility, distinct emotions and an accurate pitch
#: control, in the report's words (one per check of :func:`checks`).
BARS = (
    "each emotion of the default voice DistillMOS >= 3.1, neutral >= 3.35, PITCH +-4 st >= 3.1 (or, where the "
    "teacher's own audio of that condition on the same sentences scores below 3.1, >= that score - 0.2)",
    "Whisper tiny.en WER <= 0.03 in every condition of the default voice",
    "happy and surprised median F0 >= 10 % above neutral's; sad >= 5 % below and >= 5 % longer",
    "surprised has the widest F0 spread",
    "the pitch control's median F0 within 10 % of 2 ** (st / 12) of neutral's",
    "m8: every emotion DistillMOS >= 2.9",
)
MOS_EMOTION, MOS_NEUTRAL, MOS_M8, WER_MAX = 3.1, 3.35, 2.9, 0.03
#: How far below its teacher's own score a condition may fall where that teacher scores below MOS_EMOTION.
TEACHER_MARGIN = 0.2


@dataclass
class Judged:
    """One clip's measures."""

    mos: float
    dnsmos_ovrl: float
    whisper: str
    pocketsphinx: str
    f0: np.ndarray  # voiced frames' F0, Hz
    seconds: float


def judge(samples: np.ndarray) -> Judged:
    """All measures of one clip (float audio at SAMPLE_RATE)."""
    heard = hear(samples, audio.SAMPLE_RATE, False, None, True)
    f0, _ = harvest(samples)
    return Judged(float(heard.mos), float(heard.dnsmos.ovrl) if heard.dnsmos else float("nan"), heard.whisper or "",
                  heard.transcript, f0[f0 > 0].astype(np.float32), len(samples) / audio.SAMPLE_RATE)


def teacher_clip(text: str, condition: Condition) -> np.ndarray:
    """The voice's teacher rendering ``text`` in ``condition`` (ValueError when it cannot move its pitch)."""
    from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, render

    return render(text, CORPUS_VOICES[condition.voice], EMOTIONS[condition.emotion], condition.semitones)


def judged_teacher(text: str, condition: Condition) -> tuple[Judged, np.ndarray]:
    samples = teacher_clip(text, condition)
    return judge(samples), samples


def renderable(condition: Condition) -> bool:
    """Whether the voice's teacher renders ``condition`` (a pitch shift needs festival's HTS engine)."""
    from tts_triton.data.prosody import CORPUS_VOICES, FESTIVAL

    return not condition.semitones or CORPUS_VOICES[condition.voice].teacher == FESTIVAL


def conditions(voices: Sequence[str], emotions: Sequence[str], shifts: Sequence[float] = PITCH_SHIFTS,
               ) -> list[Condition]:
    """Each voice in each emotion, then its neutral speech at each of ``shifts``."""
    return [Condition(v, e) for v in voices for e in emotions] + [
        Condition(v, NEUTRAL, st) for v in voices for st in shifts]


def summarize(sentences: Sequence[str], clips: Sequence[Judged]) -> dict[str, float]:
    """The table's numbers for ``clips`` of ``sentences``."""
    mos = np.array([c.mos for c in clips])
    f0 = np.concatenate([c.f0 for c in clips])
    return {"distillmos": float(mos.mean()), "distillmos_se": standard_error(mos),
            "dnsmos_ovrl": float(np.nanmean([c.dnsmos_ovrl for c in clips])),
            "whisper_wer": float(np.mean([wer(s, c.whisper) for s, c in zip(sentences, clips, strict=True)])),
            "pocketsphinx_wer": float(np.mean([wer(s, c.pocketsphinx) for s, c in zip(sentences, clips,
                                                                                         strict=True)])),
            "f0_median_hz": float(np.median(f0)) if f0.size else float("nan"),
            "f0_spread_st": float(np.std(12.0 * np.log2(f0))) if f0.size else float("nan"),
            "seconds": float(np.mean([c.seconds for c in clips])), "sentences": len(clips)}


def clip_records(sentences: Sequence[str], clips: Sequence[Judged]) -> list[dict[str, Any]]:
    """Each clip's DistillMOS, and what Whisper heard where it was not the sentence."""
    out = []
    for s, c in zip(sentences, clips, strict=True):
        err = wer(s, c.whisper)
        out.append({"distillmos": round(c.mos, 3)} | ({"whisper": c.whisper, "whisper_wer": round(err, 3)}
                                                        if err else {}))
    return out


def checks(rows: dict[tuple[str, str], dict[str, float]], default: str) -> list[tuple[str, bool, str]]:
    """Each of :data:`BARS` on the model's rows: (bar, met, the numbers). ``rows``: (condition label, stage)."""
    from tts_triton.data.prosody import EMOTIONS

    def model(voice: str, emotion: str, st: float = 0.0) -> dict[str, float] | None:
        return rows.get((Condition(voice, emotion, st).label, MODEL))

    def bound(voice: str, emotion: str, st: float = 0.0) -> float:
        """MOS_EMOTION, or TEACHER_MARGIN below the teacher's own score on the same sentences where that is lower."""
        label = Condition(voice, emotion, st).label
        teacher = rows.get((label, TEACHER))
        if (teacher is None or teacher["sentences"] != rows[label, MODEL]["sentences"]
                or teacher["distillmos"] >= MOS_EMOTION):
            return MOS_EMOTION
        return teacher["distillmos"] - TEACHER_MARGIN

    out = []
    emotional = [e for e in EMOTIONS if e != NEUTRAL]
    base = model(default, NEUTRAL)
    if base is None:
        return out
    scores = {e: model(default, e)["distillmos"] for e in emotional if model(default, e)}
    shifted = {st: model(default, NEUTRAL, st) for st in PITCH_SHIFTS if model(default, NEUTRAL, st)}
    bounds = {e: bound(default, e) for e in scores} | {st: bound(default, NEUTRAL, st) for st in shifted}
    mos_ok = (all(v >= bounds[e] for e, v in scores.items()) and base["distillmos"] >= MOS_NEUTRAL
              and all(r["distillmos"] >= bounds[st] for st, r in shifted.items()))

    def against(score: float, key: str | float) -> str:
        return f"{score:.2f}" + (f" (teacher's bound {bounds[key]:.2f})" if bounds[key] < MOS_EMOTION else "")

    detail = ", ".join([f"neutral {base['distillmos']:.2f}", *(f"{e} {against(v, e)}" for e, v in scores.items()),
                        *(f"{st:+g} st {against(r['distillmos'], st)}" for st, r in shifted.items())])
    out.append((BARS[0], mos_ok, detail))
    own = [r for (label, stage), r in rows.items() if stage == MODEL and label.split()[0] == default]
    worst = max(r["whisper_wer"] for r in own)
    out.append((BARS[1], worst <= WER_MAX, f"largest {worst:.3f}"))
    f0 = {e: model(default, e)["f0_median_hz"] / base["f0_median_hz"] for e in emotional if model(default, e)}
    sad = model(default, "sad")
    longer = sad["seconds"] / base["seconds"] if sad else float("nan")
    apart = (f0.get("happy", 0) >= 1.10 and f0.get("surprised", 0) >= 1.10 and f0.get("sad", 9) <= 0.95
             and longer >= 1.05)
    out.append((BARS[2], apart, ", ".join(f"{e} {v:.2f}x" for e, v in f0.items()) + f"; sad {longer:.2f}x as long"))
    spreads = {e: model(default, e)["f0_spread_st"] for e in EMOTIONS if model(default, e)}
    out.append((BARS[3], max(spreads, key=spreads.__getitem__) == "surprised",
                ", ".join(f"{e} {v:.2f}" for e, v in spreads.items())))
    ratios = {st: r["f0_median_hz"] / base["f0_median_hz"] for st, r in shifted.items()}
    out.append((BARS[4], bool(ratios) and all(abs(v / 2 ** (st / 12) - 1) <= 0.10 for st, v in ratios.items()),
                ", ".join(f"{st:+g} st {v:.3f}x (asked {2 ** (st / 12):.3f}x)" for st, v in ratios.items())))
    m8 = {e: model("m8", e)["distillmos"] for e in EMOTIONS if model("m8", e)}
    if m8:
        out.append((BARS[5], all(v >= MOS_M8 for v in m8.values()),
                    ", ".join(f"{e} {v:.2f}" for e, v in m8.items())))
    return out


def model_clips(synthesizer: Any, chosen: Sequence[Condition], sentences: Sequence[str],
                progress: ProgressLine | None = None) -> dict[str, list[np.ndarray]]:
    """The model's clips of each condition (by label), as served (:class:`~tts_triton.serving.voice.Voice`)."""
    clips: dict[str, list[np.ndarray]] = {}
    for c in chosen:
        clips[c.label] = []
        for s in sentences:
            clips[c.label].append(synthesizer.synthesize(s, c.voice, c.emotion, pitch=c.semitones).audio)
            if progress:
                progress.advance(detail=f"{MODEL} {c.label}")
    return clips


class ServedVoice:
    """The served ``tts`` model at ``url`` (gRPC), called as :class:`~tts_triton.serving.voice.Voice` is here."""

    def __init__(self, url: str) -> None:
        from tts_triton.client import TTSClient

        self.client = TTSClient(url, timeout=600)

    def synthesize(self, text: str, voice: str, emotion: str, *, pitch: float = 0.0) -> Any:
        """The whole utterance, float32 at SAMPLE_RATE (in ``.audio``)."""
        from tts_triton.serving.voice import Speech

        got = self.client.synthesize(text, voice=voice, emotion=emotion, pitch=pitch)
        return Speech(audio.resample(got.audio, got.sample_rate))


def save_clips(folder: Path, clips: dict[str, list[np.ndarray]]) -> None:
    """``clips`` as int16 at the judges' own rate (small enough to carry back from a GPU host), one compressed
    ``<label>.npz`` per condition in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for label, xs in clips.items():
        pcm = [np.frombuffer(audio.pcm16(to_judge_rate(x, audio.SAMPLE_RATE)), "<i2") for x in xs]
        np.savez_compressed(folder / f"{label}.npz", *pcm)


def load_clips(folder: Path) -> dict[str, list[np.ndarray]]:
    """The clips :func:`save_clips` wrote, float32 at SAMPLE_RATE."""
    clips = {}
    for path in sorted(folder.glob("*.npz")):
        with np.load(path) as data:
            clips[path.stem] = [audio.resample(to_judge_rate(data[f"arr_{i}"], JUDGE_RATE), JUDGE_RATE)
                                for i in range(len(data.files))]
    return clips


def measure(args: argparse.Namespace) -> tuple[list[str], dict[tuple[str, str], list[Judged]], str]:
    """Every stage's judged clips by (condition label, stage), the sentences, and the default voice."""
    import torch

    from tts_triton.core import contract
    from tts_triton.data.prosody import EMOTIONS
    from tts_triton.evaluate.synthesis import copy_synthesis, voice_bank_for
    from tts_triton.models.checkpoint import resolve
    from tts_triton.serving.voice import Voice

    sentences = list(HELDOUT_SENTENCES[: args.sentences])
    few = sentences[: args.stage_sentences]
    ckpt = resolve(args.checkpoint)
    bank, _ = voice_bank_for(args.checkpoint, args.voice_bank, ckpt)
    local = Voice(ckpt, bank, device=args.device)  # its vocoder makes the copy stage
    synthesizer = ServedVoice(args.url) if args.url else local
    voices = args.voices.split(",") if args.voices else [bank.default_voice]
    chosen = conditions(voices, list(EMOTIONS), () if args.no_pitch else PITCH_SHIFTS)
    vocoder = local.backend.stages[contract.VOCODER]
    if args.save_clips:
        save_clips(args.save_clips, model_clips(synthesizer, chosen, sentences,
                                                ProgressLine("expressive (synthesize)", len(chosen) * len(sentences))))
        return sentences, {}, bank.default_voice
    saved = load_clips(args.clips) if args.clips else None
    if saved is not None and any(len(saved.get(c.label, ())) != len(sentences) for c in chosen):
        raise SystemExit(f"{args.clips} lacks some of the {len(chosen)} conditions x {len(sentences)} sentences")
    staged = [c for c in chosen if renderable(c)] if args.stage_sentences else []
    progress = ProgressLine("expressive (synthesize + judge)",
                            len(chosen) * len(sentences) * 2 + len(staged) * len(few) * 3)
    judged: dict[tuple[str, str], list] = {}
    with process_pool(args.jobs) as pool:
        teachers = {c: [pool.submit(judged_teacher, s, c) for s in few] for c in staged}
        for c in chosen:
            if saved is not None:
                clips = saved[c.label]
                progress.advance(len(clips), detail=f"{MODEL} {c.label} (saved)")
            else:
                clips = model_clips(synthesizer, [c], sentences, progress)[c.label]
            if args.samples:
                args.samples.mkdir(parents=True, exist_ok=True)
                for i, samples in enumerate(clips[:2]):
                    name = f"{c.label.replace(' ', '-')}-{i:02d}.wav"
                    audio.save_wav(args.samples / name, samples, audio.SAMPLE_RATE)
            judged[c.label, MODEL] = [pool.submit(judge, x) for x in clips]
        for c, futures in teachers.items():
            rendered = []
            for f in futures:
                result, samples = f.result()
                rendered.append(result)
                progress.advance(detail=f"{TEACHER} {c.label}")
                with torch.inference_mode():
                    copied = copy_synthesis(vocoder.vocode, samples)
                judged.setdefault((c.label, COPY), []).append(pool.submit(judge, copied))
                progress.advance(detail=f"{COPY} {c.label}")
            judged[c.label, TEACHER] = rendered
        out: dict[tuple[str, str], list[Judged]] = {}
        for key, clips in judged.items():
            out[key] = []
            for clip in clips:
                if isinstance(clip, Judged):
                    out[key].append(clip)
                else:
                    out[key].append(clip.result())
                    progress.advance(detail=f"judged {key[1]} {key[0]}")
    order = [(c.label, stage) for c in chosen for stage in (TEACHER, COPY, MODEL) if (c.label, stage) in out]
    return sentences, {key: out[key] for key in order}, bank.default_voice


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.expressive", description=__doc__.split("\n")[0])
    add_judged_run_options(p)
    p.add_argument("--voice-bank", type=Path, help="default: voice_bank.json beside the checkpoint")
    p.add_argument("--voices", help="comma-separated voices of the bank (default: its default voice)")
    p.add_argument("--stage-sentences", type=int, default=10,
                   help="sentences the teacher and copy stages speak (0: the model alone)")
    p.add_argument("--no-pitch", action="store_true", help="the emotions alone, no pitch shifts")
    p.add_argument("--device", default="cpu", help="where the model synthesizes (cuda on a GPU host)")
    p.add_argument("--url", help="judge the served tts model at this gRPC host:port instead of the in-process one "
                                 "(the server's voice bank; --checkpoint and --voice-bank name its teacher side)")
    clips = p.add_mutually_exclusive_group()
    clips.add_argument("--save-clips", type=Path, help="synthesize the model's clips into this folder and stop")
    clips.add_argument("--clips", type=Path, help="judge the model's clips from this folder instead of synthesizing")
    p.add_argument("--samples", type=Path, help="folder for the model's clips of the first two sentences")
    p.add_argument("--out", type=Path, default=Path("docs/records/eval/expressive.md"))
    args = p.parse_args(argv)
    command = shlex.join(["python", "-m", "tts_triton.evaluate.expressive", *(sys.argv[1:] if argv is None else argv)])
    started = time.monotonic()
    sentences, judged, default = measure(args)
    if args.save_clips:
        print(f"model clips -> {args.save_clips}")
        return 0
    spoken = {key: sentences if key[1] == MODEL else sentences[: args.stage_sentences] for key in judged}
    rows = {key: summarize(spoken[key], clips) for key, clips in judged.items()}
    table = markdown_table(
        ["condition", "stage", "DistillMOS", "DNSMOS OVRL", "Whisper WER", "PocketSphinx WER", "F0 median Hz",
         "F0 spread st", "seconds"],
        [[label, stage, f"{r['distillmos']:.2f} ± {r['distillmos_se']:.2f}", f"{r['dnsmos_ovrl']:.2f}",
          f"{r['whisper_wer']:.3f}", f"{r['pocketsphinx_wer']:.3f}", f"{r['f0_median_hz']:.0f}",
          f"{r['f0_spread_st']:.2f}", f"{r['seconds']:.2f}"] for (label, stage), r in rows.items()])
    verdicts = checks(rows, default)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join([
        f"# Expressive and natural: {args.checkpoint or 'the shipped checkpoint'}", "",
        f"Generated by `{command}` in {time.monotonic() - started:.0f} s: the model on {len(sentences)} held-out "
        f"sentences, the teacher and the vocoder alone (copy) on the first {args.stage_sentences}. DistillMOS: mean ± "
        "standard error over sentences; F0 over all voiced frames.", "", table, "",
        "## The bars (model rows)", "",
        markdown_table(["bar", "met", "measured"], [[b, "yes" if ok else "**no**", d] for b, ok, d in verdicts]),
        ""]))
    args.out.with_suffix(".json").write_text(json.dumps({
        "command": command, "sentences": sentences, "summary": {f"{label} | {stage}": r
                                                                for (label, stage), r in rows.items()},
        "clips": {f"{label} | {stage}": clip_records(spoken[label, stage], clips)
                  for (label, stage), clips in judged.items()},
        "bars": [{"bar": b, "met": ok, "measured": d} for b, ok, d in verdicts]}, indent=1))
    print(f"expressive -> {args.out}")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
