"""Render the corpus: sentences x (voice, emotion) by each voice's teacher (espeak-ng, flite or festival's HTS engine),
into a directory.

    python -m tts_triton.data.corpus build --out DIR [--sentences FILE] [--jobs N] [--limit N] [--voices ...]

Which utterances (:func:`plan`): every test sentence in every voice, with one emotion per sentence
(cycling, so that all voices say it the same way); every train and validation sentence in
``repeats`` distinct conditions, a condition being a (voice, emotion) pair or a voice's neutral speech at one of
its pitch variants (``Voice.pitch_variants``), always the ones least used so far relative to the voice's
``weight`` (ties broken by a seeded shuffle), which keeps the conditions balanced in those proportions.

A build that stops (killed, out of time) leaves ``manifest.jsonl.partial``; building into the same
directory again with the same options resumes after the last complete shard.

The directory (read it with :class:`tts_triton.data.dataset.Corpus`):

``manifest.jsonl``
    One utterance per line: ``id, sentence_id, split, voice, emotion, text, semitones`` (the pitch variant, 0 for
    none), ``ids`` (phoneme ids,
    ``BOS ... EOS``), ``agreement`` (the fraction of those phonemes the teacher said, null for espeak-ng:
    :class:`tts_triton.data.prosody.Rendering`), ``n_samples, n_frames``
    (``n_samples == n_frames * HOP_LENGTH``), ``shard``, ``offset`` (first sample in the audio shard) and
    ``mel_offset`` (first frame in the mel shard, ``offset // HOP_LENGTH``).
``audio-NNNNN.npy``
    int16 samples of the shard's utterances, concatenated (float audio is ``int16 / 32767``).
``mel-NNNNN.npy``
    float16 ``[frames, N_MELS]`` log-mel (:func:`tts_triton.core.audio.mel_spectrogram` of that float audio).
``sentences.tsv``
    All sentences used, with their splits (:func:`tts_triton.data.sentences.read_sentences`).
``dataset.json``
    Summary: hours, counts per split / voice / emotion / pair, the prosody tables, the teachers' versions,
    the phoneme agreement of the flite utterances.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tts_triton.core import audio
from tts_triton.core.symbols import BOS_ID, EOS_ID, N_SYMBOLS
from tts_triton.data import espeak, festival, flite
from tts_triton.data.prosody import (
    CORPUS_VOICES,
    EMOTIONS,
    FESTIVAL,
    FLITE,
    NEUTRAL,
    PITCH_ORDER,
    check_voices,
    rendering,
)
from tts_triton.data.sentences import (
    DEFAULT_COUNT,
    DEFAULT_SEED,
    SPLITS,
    CorpusSentence,
    Rng,
    fingerprint,
    generate,
    read_sentences,
    write_sentences,
)
from tts_triton.jobs.progress import ProgressLine
from tts_triton.jobs.workers import single_threaded_blas
from tts_triton.text import text_to_sequences

FORMAT_VERSION = 1
MANIFEST = "manifest.jsonl"
SUMMARY = "dataset.json"
SENTENCES = "sentences.tsv"
#: Pairs per train / validation sentence by default: 5400 x 3 + 300 x 3 + 300 x 12 voices = 20,700 utterances.
#: Three, so that the espeak-ng voices keep the share each had before flite's slt (weight 5) took a third.
DEFAULT_REPEATS = 3
SHARD_UTTERANCES = 500
INT16_SCALE = 32767.0


def audio_shard_name(shard: int) -> str:
    return f"audio-{shard:05d}.npy"


def mel_shard_name(shard: int) -> str:
    return f"mel-{shard:05d}.npy"


@dataclass(frozen=True)
class Utterance:
    """One planned rendering: ``id`` is ``<sentence_id>-<voice>-<emotion>``, then ``<+N>st`` for a pitch variant of
    ``semitones`` (0: none)."""

    id: str
    sentence_id: str
    split: str
    voice: str
    emotion: str
    text: str
    semitones: float = field(default=0.0, kw_only=True)

    @property
    def condition(self) -> tuple[str, str, float]:
        """What the rendering is conditioned on: voice, emotion and pitch variant."""
        return self.voice, self.emotion, self.semitones


def conditions(voices: Sequence[str], emotions: Sequence[str]) -> list[tuple[str, str, float]]:
    """Every (voice, emotion, semitones) condition of a plan: each voice in each of ``emotions`` as rendered, then
    in its neutral speech at each of its pitch variants (when neutral is among ``emotions``)."""
    plain = [(v, e, 0.0) for v in voices for e in emotions]
    variants = [(v, NEUTRAL, float(st)) for v in voices for st in CORPUS_VOICES[v].pitch_variants
                if NEUTRAL in emotions]
    return plain + variants


def utterance_id(sentence_id: str, voice: str, emotion: str, semitones: float = 0.0) -> str:
    """``<sentence_id>-<voice>-<emotion>``, with ``<+N>st`` after it for a pitch variant."""
    return f"{sentence_id}-{voice}-{emotion}" + (f"{semitones:+g}st" if semitones else "")


def plan(
    sentences: Sequence[CorpusSentence],
    voices: Sequence[str] = tuple(CORPUS_VOICES),
    emotions: Sequence[str] = tuple(EMOTIONS),
    repeats: int = DEFAULT_REPEATS,
    seed: int = DEFAULT_SEED,
) -> list[Utterance]:
    """The utterances to render, in sentence order (see the module docstring for the rule)."""
    pairs = conditions(voices, emotions)
    if not 1 <= repeats <= len(pairs):
        raise ValueError(f"repeats must be in 1..{len(pairs)}, got {repeats}")
    used: dict[str, Counter[tuple[str, str, float]]] = {split: Counter() for split in SPLITS}
    rng = Rng(seed)
    out: list[Utterance] = []
    n_test = 0
    for s in sentences:
        if s.split == "test":
            emotion = emotions[n_test % len(emotions)]
            n_test += 1
            chosen = [(v, emotion, 0.0) for v in voices]
        else:
            tiebreak = {pair: rng.next64() for pair in pairs}
            chosen = sorted(pairs, key=lambda pair: (used[s.split][pair] / CORPUS_VOICES[pair[0]].weight,
                                                     tiebreak[pair]))[:repeats]
            used[s.split].update(chosen)
        out += [Utterance(utterance_id(s.id, v, e, st), s.id, s.split, v, e, s.text, semitones=st)
                for v, e, st in chosen]
    return out


def phoneme_ids(text: str) -> list[int]:
    """Phoneme ids of ``text`` as one ``BOS ... EOS`` sequence, joining the pieces the front end may split it in."""
    sequences = text_to_sequences(text)
    ids = [BOS_ID]
    for sequence in sequences:
        ids += [i for i in sequence if i not in (BOS_ID, EOS_ID)]
    return [*ids, EOS_ID]


@dataclass
class Rendered:
    """A rendered utterance: int16 audio and float16 mel of ``n_frames`` frames."""

    utterance: Utterance
    ids: list[int]
    audio: np.ndarray
    mel: np.ndarray
    agreement: float | None = None


def render_group(utterances: Sequence[Utterance]) -> list[Rendered]:
    """Render utterances of one sentence (its phoneme ids are computed once)."""
    ids = phoneme_ids(utterances[0].text)
    out = []
    for u in utterances:
        said = rendering(u.text, CORPUS_VOICES[u.voice], EMOTIONS[u.emotion], semitones=u.semitones)
        pcm = np.round(said.audio * INT16_SCALE).astype(np.int16)
        mel = audio.mel_spectrogram(pcm.astype(np.float32) / INT16_SCALE)
        if mel.shape[0] != len(pcm) // audio.HOP_LENGTH:
            raise AssertionError(f"{u.id}: {mel.shape[0]} mel frames for {len(pcm)} samples")
        out.append(Rendered(u, ids, pcm, mel.astype(np.float16), said.agreement))
    return out


def _groups(utterances: Sequence[Utterance]) -> list[list[Utterance]]:
    groups: list[list[Utterance]] = []
    for u in utterances:
        if groups and groups[-1][0].sentence_id == u.sentence_id:
            groups[-1].append(u)
        else:
            groups.append([u])
    return groups


@dataclass
class _ShardWriter:
    root: Path
    shard_utterances: int
    shard: int = 0
    audio: list[np.ndarray] = field(default_factory=list)
    mels: list[np.ndarray] = field(default_factory=list)
    samples: int = 0

    def add(self, r: Rendered) -> dict:
        entry = {
            **asdict(r.utterance), "ids": r.ids, "agreement": r.agreement,
            "n_samples": len(r.audio), "n_frames": len(r.mel),
            "shard": self.shard, "offset": self.samples, "mel_offset": self.samples // audio.HOP_LENGTH,
        }
        self.audio.append(r.audio)
        self.mels.append(r.mel)
        self.samples += len(r.audio)
        if len(self.audio) >= self.shard_utterances:
            self.flush()
        return entry

    def flush(self) -> None:
        if not self.audio:
            return
        np.save(self.root / audio_shard_name(self.shard), np.concatenate(self.audio))
        np.save(self.root / mel_shard_name(self.shard), np.concatenate(self.mels))
        self.shard, self.audio, self.mels, self.samples = self.shard + 1, [], [], 0


def _results(groups: list[list[Utterance]], jobs: int) -> Iterator[list[Rendered]]:
    if jobs <= 1:
        yield from map(render_group, groups)
        return
    with single_threaded_blas():  # multiprocessing.Pool starts its workers at once, and they keep the setting
        pool = multiprocessing.get_context("spawn").Pool(jobs)
    with pool:
        yield from pool.imap(render_group, groups, chunksize=4)


def build(
    out: Path,
    sentences: Sequence[CorpusSentence] | None = None,
    *,
    jobs: int = 1,
    limit: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    voices: Sequence[str] = tuple(CORPUS_VOICES),
    emotions: Sequence[str] = tuple(EMOTIONS),
    shard_utterances: int = SHARD_UTTERANCES,
    progress: bool = True,
) -> dict:
    """Render the corpus into ``out`` (created; must not hold a manifest yet) and return the summary.

    ``sentences`` defaults to the output of :func:`~tts_triton.data.sentences.generate`; ``limit`` keeps the
    first ``limit`` planned utterances (the plan is in sentence order, so all splits occur early). A
    ``manifest.jsonl.partial`` left in ``out`` by an interrupted build is resumed (:func:`resume_point`).
    Raises ``FileExistsError``, ``ValueError`` for unknown voices or emotions or a partial build of another
    plan, :class:`~tts_triton.data.espeak.EspeakError`, :class:`~tts_triton.data.flite.FliteError` and
    :class:`~tts_triton.data.festival.FestivalError`.
    """
    unknown = sorted(set(voices) - set(CORPUS_VOICES)) + sorted(set(emotions) - set(EMOTIONS))
    if unknown:
        raise ValueError(f"unknown voices or emotions {unknown}; voices {list(CORPUS_VOICES)}, "
                         f"emotions {list(EMOTIONS)}")
    out = Path(out)
    if (out / MANIFEST).exists():
        raise FileExistsError(f"{out / MANIFEST} exists; build into a new directory")
    check_voices(voices)
    sentences = list(generate() if sentences is None else sentences)
    utterances = plan(sentences, voices, emotions, repeats)[:limit]
    out.mkdir(parents=True, exist_ok=True)
    write_sentences(sentences, out / SENTENCES)
    entries, shards = resume_point(out, utterances, shard_utterances)
    if entries and progress:
        print(f"resuming after {len(entries)} utterances ({shards} shards) in {out}", file=sys.stderr)
    started = time.monotonic()
    todo = utterances[len(entries):]
    meter = ProgressLine("utterances", len(todo)) if progress else None
    rendered = 0.0  # seconds of audio
    writer = _ShardWriter(out, shard_utterances, shard=shards)
    with open(out / (MANIFEST + ".partial"), "w", encoding="utf-8") as manifest:
        manifest.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
        for group in _results(_groups(todo), jobs):
            for r in group:
                entry = writer.add(r)
                entries.append(entry)
                manifest.write(json.dumps(entry, ensure_ascii=False) + "\n")
            manifest.flush()
            rendered += sum(len(r.audio) for r in group) / audio.SAMPLE_RATE
            if meter:
                speed = rendered / max(time.monotonic() - started, 1e-9)
                meter.advance(len(group), f"{speed:.0f}x real time, {rendered / 3600:.2f} h")
        writer.flush()
    if meter:
        meter.close()
    summary = summarize(entries, sentences, shards=writer.shard, seconds=time.monotonic() - started, jobs=jobs,
                        voices=voices)
    (out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    os.replace(out / (MANIFEST + ".partial"), out / MANIFEST)
    return summary


def resume_point(out: Path, utterances: Sequence[Utterance], shard_utterances: int) -> tuple[list[dict], int]:
    """The manifest entries an interrupted build in ``out`` completed, and the number of its shards.

    Kept: the entries of the leading shards whose audio and mel files were both written (a shard is
    written when full, so its entries are exactly ``shard_utterances``). Raises ``ValueError`` when those
    entries are not the start of ``utterances`` (the partial build had another plan).
    """
    partial = out / (MANIFEST + ".partial")
    if not partial.exists():
        return [], 0
    with open(partial, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.endswith("\n")]
    shards = 0
    while (out / audio_shard_name(shards)).exists() and (out / mel_shard_name(shards)).exists() and \
            sum(r["shard"] == shards for r in rows) == shard_utterances:
        shards += 1
    kept = [r for r in rows if r["shard"] < shards]
    planned = [u.id for u in utterances[: len(kept)]]
    if [r["id"] for r in kept] != planned or len(kept) > len(utterances):
        raise ValueError(f"{partial} holds another plan than this build's (other sentences, voices, emotions, "
                         "repeats or limit); build into a new directory")
    return kept, shards


def summarize(entries: Iterable[dict], sentences: Sequence[CorpusSentence], *, shards: int, seconds: float,
              jobs: int, voices: Sequence[str] = tuple(CORPUS_VOICES)) -> dict:
    """The ``dataset.json`` content for manifest ``entries``."""
    entries = list(entries)
    hours = Counter()
    counts: dict[str, Counter[str]] = {key: Counter() for key in ("split", "voice", "emotion", "pair")}
    for e in entries:
        hours[e["split"]] += e["n_samples"] / audio.SAMPLE_RATE / 3600
        for key in ("split", "voice", "emotion"):
            counts[key][e[key]] += 1
        st = e.get("semitones", 0.0)
        counts["pair"][f"{e['voice']}/{e['emotion']}" + (f"/{st:+g}st" if st else "")] += 1
    total = sum(hours.values())
    agreements = [e["agreement"] for e in entries if e.get("agreement") is not None]
    teachers = {teacher for v in voices
                for teacher in (CORPUS_VOICES[v].teacher,)}
    return {
        "format": FORMAT_VERSION,
        "sample_rate": audio.SAMPLE_RATE, "hop_length": audio.HOP_LENGTH, "n_mels": audio.N_MELS,
        "audio_dtype": "int16", "audio_scale": INT16_SCALE, "mel_dtype": "float16", "n_symbols": N_SYMBOLS,
        "utterances": len(entries), "hours": round(total, 4),
        "hours_by_split": {k: round(v, 4) for k, v in sorted(hours.items())},
        "counts": {key: dict(sorted(c.items())) for key, c in counts.items()},
        "shards": shards,
        "sentences": {"count": len(sentences), "fingerprint": fingerprint(sentences), "file": SENTENCES},
        "voices": {name: asdict(CORPUS_VOICES[name]) for name in voices},
        "emotions": {name: asdict(e) for name, e in EMOTIONS.items()},
        "pitch_order": list(PITCH_ORDER),
        "espeak": espeak.espeak_version(),
        **({"flite": flite.flite_version()} if FLITE in teachers else {}),
        **({"festival": festival.festival_version()} if FESTIVAL in teachers else {}),
        "agreement": {"utterances": len(agreements),
                      "mean": round(float(np.mean(agreements)), 4) if agreements else None,
                      "exact": round(float(np.mean([a == 1.0 for a in agreements])), 4) if agreements else None},
        "build": {"seconds": round(seconds, 1), "jobs": jobs,
                  "realtime_factor": round(total * 3600 / seconds, 1) if seconds > 0 else None},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.data.corpus", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="render the corpus into a new dataset directory")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--sentences", type=Path, help="id<TAB>split<TAB>text file (default: the built-in generator)")
    b.add_argument("--count", type=int, default=DEFAULT_COUNT, help="sentences to generate without --sentences")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--limit", type=int, help="render only the first N planned utterances")
    b.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="(voice, emotion) pairs per train/val sentence")
    b.add_argument("--voices", default=",".join(CORPUS_VOICES),
                   help="comma-separated subset of " + ",".join(CORPUS_VOICES))
    b.add_argument("--emotions", default=",".join(EMOTIONS), help="comma-separated subset of " + ",".join(EMOTIONS))
    b.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    sentences = read_sentences(args.sentences) if args.sentences else generate(args.count)
    summary = build(args.out, sentences, jobs=args.jobs, limit=args.limit, repeats=args.repeats,
                    voices=args.voices.split(","), emotions=args.emotions.split(","), progress=not args.quiet)
    print(f"{summary['utterances']} utterances, {summary['hours']:.2f} h "
          f"({', '.join(f'{k} {v:.2f} h' for k, v in summary['hours_by_split'].items())}), "
          f"{summary['build']['seconds']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
