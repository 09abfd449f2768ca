"""Where naturalness is lost: every stage of the default voice and the engines beside it, through the judges.

    python -m tts_triton.evaluate.naturalness [--checkpoint CKPT] [--voices slt,f1,m1] [--sentences 30]
        [--jobs 2] [--out docs/records/eval/naturalness.md]

On the first ``--sentences`` held-out sentences (:mod:`~tts_triton.evaluate.heldout`), in the neutral preset, each
system's clips go through DistillMOS, DNSMOS P.835 and Whisper tiny.en (:mod:`~tts_triton.evaluate.judges`) and
PocketSphinx (:mod:`~tts_triton.evaluate.asr`). The stages of the first voice (``slt``, the default):

- **teacher**: its corpus teacher's neutral rendering, driven by espeak-ng's pronunciations as the corpus renders
  it (festival's HTS ``slt`` for ``slt``);
- **vocoder alone** on the teacher's log-mel (copy synthesis), the generator's output as it is, and after the mel
  match (:class:`~tts_triton.models.mel_match.MelMatch`, as served);
- **model**: the in-process synthesizer with the voice bank's preset, as served (mel match on), and the same
  mels through the generator alone (mel match off).

Then the model as served for the other ``--voices``, their teachers, and the engines that run here as
references: flite's ``rms`` and ``kal16`` (male) and its own ``slt`` on its own lexicon, and festival with the HTS
``slt`` voice (Debian ``festival``, ``festvox-us-slt-hts``) when ``festival`` is on PATH.

The report is a table of mean DistillMOS (± standard error over sentences), mean DNSMOS P.835 OVRL and BAK, and
each ASR's mean WER; the JSON beside it holds every score and transcript.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from tts_triton.data.festival import FESTIVAL
from tts_triton.evaluate.asr import Heard, hear, wer
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES, add_judged_run_options
from tts_triton.evaluate.measures import process_pool, standard_error
from tts_triton.jobs.progress import ProgressLine
from tts_triton.jobs.tables import markdown_table

#: flite voices heard as references on flite's own lexicon: its US female and its two natural-sounding males.
FLITE_REFERENCES = ("slt", "rms", "kal16")


def festival_render(text: str) -> tuple[int, np.ndarray]:
    """``text`` spoken by festival's HTS ``slt`` on festival's own lexicon: ``(rate, int16 samples)``."""
    from tts_triton.data.festival import synthesize

    said = synthesize(text)
    return said.rate, said.samples


def flite_plain(text: str, voice: str) -> tuple[int, np.ndarray]:
    """``text`` in flite ``voice`` on flite's own lexicon, no prosody features: ``(rate, int16 samples)``."""
    from tts_triton.data.flite import synthesize

    said = synthesize(text, voice)
    return said.rate, said.samples


def corpus_teacher(text: str, voice: str) -> tuple[int, np.ndarray]:
    """``text`` as the corpus renders corpus ``voice`` in the neutral preset: ``(SAMPLE_RATE, float samples)``."""
    from tts_triton.core import audio
    from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, NEUTRAL, render

    return audio.SAMPLE_RATE, render(text, CORPUS_VOICES[voice], EMOTIONS[NEUTRAL])


def rendered_heard(render: Callable[..., tuple[int, np.ndarray]], *args: str) -> tuple[Heard, np.ndarray]:
    """One reference clip (``render(*args)``) heard by all three judges, with its samples at SAMPLE_RATE."""
    from tts_triton.core import audio
    from tts_triton.data.flite import resample

    rate, samples = render(*args)
    x = samples.astype(np.float32) / 32768.0 if samples.dtype == np.int16 else samples.astype(np.float32)
    return hear(x, rate, False, judges=True), resample(x, rate, audio.SAMPLE_RATE) if rate != audio.SAMPLE_RATE else x


def measure(checkpoint: Path | None, voices: Sequence[str], count: int, jobs: int,
            references: bool = True) -> dict[str, list[Heard]]:
    """Every system's judged clips of ``count`` held-out sentences, keyed by the system's label, in table order;
    the other engines (flite's own voices, festival) only with ``references``."""
    import torch

    from tts_triton.core import audio, contract
    from tts_triton.data.prosody import CORPUS_VOICES
    from tts_triton.evaluate.synthesis import RecordingBackend, synthesize, voice_bank_for
    from tts_triton.models.checkpoint import resolve
    from tts_triton.serving.voice import Voice

    sentences = list(HELDOUT_SENTENCES[:count])
    ckpt = resolve(checkpoint)
    bank, _ = voice_bank_for(checkpoint, None, ckpt, voices)
    networks = Voice(ckpt).backend
    stages = networks.stages
    vocoder = stages[contract.VOCODER]
    backend = RecordingBackend(networks)
    default = voices[0]
    teacher = f"teacher: {CORPUS_VOICES[default].teacher_name} (corpus rendering)"
    refs: dict[str, list[Future[tuple[Heard, np.ndarray]]]] = {}
    futures: dict[str, list[Future[Heard]]] = {}
    rate = audio.SAMPLE_RATE
    with process_pool(jobs) as pool:
        refs[teacher] = [pool.submit(rendered_heard, corpus_teacher, s, default) for s in sentences]
        for v in voices[1:]:
            label = f"teacher of {v}: {CORPUS_VOICES[v].teacher_name}"
            refs[label] = [pool.submit(rendered_heard, corpus_teacher, s, v) for s in sentences]
        for v in FLITE_REFERENCES if references else ():
            refs[f"flite {v} (its own lexicon)"] = [pool.submit(rendered_heard, flite_plain, s, v) for s in sentences]
        if references and shutil.which(FESTIVAL):
            refs["festival + HTS slt"] = [pool.submit(rendered_heard, festival_render, s) for s in sentences]
        # each reference clip advances once (judged), each of the checkpoint's clips twice (made, judged)
        progress = ProgressLine("naturalness (synthesize + judge)", sum(map(len, refs.values()))
                                + 2 * count * (4 + len(voices) - 1))
        labels = ["vocoder alone on the teacher's mel", "vocoder alone + mel match", "model, generator alone",
                  f"model {default} (served: mel match on)"]
        for label in labels:
            futures[label] = []
        for s, ref in zip(sentences, refs[teacher], strict=True):
            _, samples = ref.result()
            mel = torch.from_numpy(audio.mel_spectrogram(samples))[None]
            clip = asyncio.run(synthesize(backend, ckpt.config, s, bank.style(default, bank.default_emotion)))
            with torch.inference_mode():
                raw = vocoder.generator(mel.transpose(1, 2), *vocoder.track(mel)).squeeze(1)
                matched = vocoder.vocode(mel)
                decoded = torch.from_numpy(clip.mel)[None]
                model_raw = vocoder.generator(vocoder.postnet(decoded).transpose(1, 2), *vocoder.track(decoded))
            for label, x in zip(labels, (raw, matched, model_raw, torch.from_numpy(clip.audio)), strict=True):
                futures[label].append(pool.submit(hear, x.reshape(-1).numpy(), rate, False, None, True))
                progress.advance(detail=label)
        for v in voices[1:]:
            label = f"model {v} (served)"
            futures[label] = []
            for s in sentences:
                clip = asyncio.run(synthesize(backend, ckpt.config, s, bank.style(v, bank.default_emotion)))
                futures[label].append(pool.submit(hear, clip.audio, rate, False, None, True))
                progress.advance(detail=label)
        heard: dict[str, list[Heard]] = {}
        for label, fs in [*refs.items(), *futures.items()]:
            heard[label] = []
            for f in fs:
                result = f.result()
                heard[label].append(result[0] if isinstance(result, tuple) else result)
                progress.advance(detail=label)
    order = [teacher, *labels, *(k for k in heard if k not in (teacher, *labels))]
    return {label: heard[label] for label in order}


def summary(sentences: Sequence[str], clips: Sequence[Heard]) -> dict[str, float]:
    """Mean DistillMOS, its standard error, mean DNSMOS OVRL and BAK (NaN where a clip has none), and each ASR's
    mean WER over ``clips`` of ``sentences``."""
    mos = np.array([c.mos for c in clips], dtype=np.float64)
    dns = np.array([(c.dnsmos.ovrl, c.dnsmos.bak) if c.dnsmos else (np.nan, np.nan) for c in clips], np.float64)
    return {"distillmos": float(mos.mean()),
            "distillmos_se": standard_error(mos),
            "dnsmos_ovrl": float(dns[:, 0].mean()),
            "dnsmos_bak": float(dns[:, 1].mean()),
            "whisper_wer": float(np.mean([wer(s, c.whisper or "") for s, c in zip(sentences, clips, strict=True)])),
            "pocketsphinx_wer": float(np.mean([wer(s, c.transcript) for s, c in zip(sentences, clips, strict=True)]))}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts_triton.evaluate.naturalness", description=__doc__.split("\n")[0])
    add_judged_run_options(p)
    p.add_argument("--voices", default="slt,f1,m1", help="corpus voices; the first one's stages are taken apart")
    p.add_argument("--no-references", action="store_true", help="only the checkpoint's stages and teachers")
    p.add_argument("--out", type=Path, default=Path("docs/records/eval/naturalness.md"))
    args = p.parse_args(argv)
    command = shlex.join(["python", "-m", "tts_triton.evaluate.naturalness", *(sys.argv[1:] if argv is None else argv)])
    started = time.monotonic()
    heard = measure(args.checkpoint, args.voices.split(","), args.sentences, args.jobs, not args.no_references)
    sentences = list(HELDOUT_SENTENCES[: args.sentences])
    rows = {label: summary(sentences, clips) for label, clips in heard.items()}
    table = markdown_table(["system", "DistillMOS", "DNSMOS OVRL / BAK", "Whisper tiny.en WER", "PocketSphinx WER"],
                           [[label, f"{r['distillmos']:.2f} ± {r['distillmos_se']:.2f}",
                             f"{r['dnsmos_ovrl']:.2f} / {r['dnsmos_bak']:.2f}", f"{r['whisper_wer']:.3f}",
                             f"{r['pocketsphinx_wer']:.3f}"] for label, r in rows.items()])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join([
        f"# Naturalness by stage: {args.checkpoint or 'the shipped checkpoint'}", "",
        f"Generated by `{command}` in {time.monotonic() - started:.0f} s, on {args.sentences} held-out sentences "
        "(neutral preset). DistillMOS: mean ± standard error over sentences; DNSMOS: means.", "", table, ""]))
    args.out.with_suffix(".json").write_text(json.dumps({
        "command": command, "sentences": sentences, "summary": rows,
        "clips": {label: [{"distillmos": c.mos, "dnsmos": dataclasses.asdict(c.dnsmos) if c.dnsmos else None,
                           "whisper": c.whisper, "pocketsphinx": c.transcript} for c in clips]
                  for label, clips in heard.items()}}, indent=1))
    print(f"naturalness -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
