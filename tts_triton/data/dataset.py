"""Reading a rendered corpus (:mod:`tts_triton.data.corpus`): memory-mapped shards and torch datasets.

:class:`AcousticDataset` feeds the acoustic model (phoneme ids -> mel, with a reference mel of the
same voice and emotion for the style encoder) and :func:`collate_acoustic` batches it;
:class:`VocoderDataset` feeds HiFi-GAN with aligned (mel, audio) segments. Randomness (reference
choice, segment start) is a function of ``(seed, epoch, index)``: call ``set_epoch`` before each
epoch (with ``persistent_workers=False`` so that DataLoader workers see it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tts_triton.core import audio
from tts_triton.core.symbols import PAD_ID
from tts_triton.data.corpus import FORMAT_VERSION, MANIFEST, SUMMARY, Utterance, audio_shard_name, mel_shard_name
from tts_triton.data.prosody import CORPUS_VOICES, EMOTIONS

VOICE_INDEX: dict[str, int] = {name: i for i, name in enumerate(CORPUS_VOICES)}
EMOTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(EMOTIONS)}


@dataclass(frozen=True)
class Entry(Utterance):
    """One manifest line (see :mod:`tts_triton.data.corpus`): an utterance, its phoneme ids, its place in the shards."""

    ids: tuple[int, ...]
    n_samples: int
    n_frames: int
    shard: int
    offset: int
    mel_offset: int
    #: fraction of ``ids`` the teacher said (None for espeak-ng, and in corpora built before teachers had a column)
    agreement: float | None = None


class Corpus:
    """A dataset directory: its summary, manifest entries and memory-mapped shards."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.summary: dict[str, Any] = json.loads((self.root / SUMMARY).read_text(encoding="utf-8"))
        if self.summary.get("format") != FORMAT_VERSION:
            raise ValueError(f"{self.root}: dataset format {self.summary.get('format')}, expected {FORMAT_VERSION}")
        with open(self.root / MANIFEST, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        self.entries = [Entry(**{**row, "ids": tuple(row["ids"])}) for row in rows]
        self._audio: dict[int, np.ndarray] = {}
        self._mel: dict[int, np.ndarray] = {}

    def split(self, split: str) -> list[Entry]:
        """Entries of one split (``train``, ``val`` or ``test``), in manifest order."""
        return [e for e in self.entries if e.split == split]

    def audio(self, entry: Entry) -> np.ndarray:
        """int16 samples of ``entry`` (a read-only view into the memory-mapped shard)."""
        if entry.shard not in self._audio:
            self._audio[entry.shard] = np.load(self.root / audio_shard_name(entry.shard), mmap_mode="r")
        return self._audio[entry.shard][entry.offset : entry.offset + entry.n_samples]

    def float_audio(self, entry: Entry) -> np.ndarray:
        """float32 samples of ``entry`` in [-1, 1]."""
        return self.audio(entry).astype(np.float32) / float(self.summary["audio_scale"])

    def mel(self, entry: Entry) -> np.ndarray:
        """float16 ``[n_frames, N_MELS]`` log-mel of ``entry`` (a read-only memory-mapped view)."""
        if entry.shard not in self._mel:
            self._mel[entry.shard] = np.load(self.root / mel_shard_name(entry.shard), mmap_mode="r")
        return self._mel[entry.shard][entry.mel_offset : entry.mel_offset + entry.n_frames]


def _rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch, index])


class AcousticDataset(torch.utils.data.Dataset):
    """Items for the acoustic model, as dicts:

    ``id``, ``ids`` (int64 ``[T]``), ``mel`` (float32 ``[F, N_MELS]``), ``ref_id`` and ``ref_mel``
    (another utterance of the same condition: voice, emotion and pitch variant, in the same split, drawn per
    epoch; the item
    itself only when it is the pair's sole utterance), ``voice``, ``emotion`` (names) and
    ``voice_index``, ``emotion_index`` (positions in :data:`CORPUS_VOICES` / :data:`EMOTIONS`). With ``voices``,
    only the utterances of those voices.
    """

    def __init__(self, root: str | Path | Corpus, split: str, seed: int = 0,
                 voices: Sequence[str] | None = None) -> None:
        self.corpus = root if isinstance(root, Corpus) else Corpus(root)
        # a voice filter keeps whole condition groups, so references stay within the items
        self.entries = [e for e in self.corpus.split(split) if voices is None or e.voice in voices]
        if not self.entries:
            raise ValueError(f"{self.corpus.root} has no {split!r} utterances"
                             + (f" of the voices {', '.join(voices)}" if voices is not None else ""))
        self.seed, self.epoch = seed, 0
        groups: dict[tuple[str, str, float], list[int]] = {}
        self._position = []  # of each item within its condition's group
        for i, e in enumerate(self.entries):
            group = groups.setdefault(e.condition, [])
            self._position.append(len(group))
            group.append(i)
        self._group = [groups[e.condition] for e in self.entries]

    def set_epoch(self, epoch: int) -> None:
        """Draw new references (and keep them reproducible) for ``epoch``."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.entries)

    def reference_index(self, index: int) -> int:
        """Index of the reference utterance of item ``index`` in this epoch."""
        group = self._group[index]
        if len(group) == 1:
            return index
        pick = int(_rng(self.seed, self.epoch, index).integers(len(group) - 1))
        return group[pick + (pick >= self._position[index])]

    def __getitem__(self, index: int) -> dict[str, Any]:
        e = self.entries[index]
        ref = self.entries[self.reference_index(index)]
        return {
            "id": e.id,
            "ids": torch.tensor(e.ids, dtype=torch.long),
            "mel": torch.from_numpy(self.corpus.mel(e).astype(np.float32)),
            "ref_id": ref.id,
            "ref_mel": torch.from_numpy(self.corpus.mel(ref).astype(np.float32)),
            "voice": e.voice,
            "emotion": e.emotion,
            "voice_index": VOICE_INDEX[e.voice],
            "emotion_index": EMOTION_INDEX[e.emotion],
        }


def _pad(tensors: list[torch.Tensor], value: float, multiple: int = 1) -> torch.Tensor:
    length = max(t.shape[0] for t in tensors)
    length = -(-length // multiple) * multiple
    out = torch.full((len(tensors), length, *tensors[0].shape[1:]), value, dtype=tensors[0].dtype)
    for i, t in enumerate(tensors):
        out[i, : t.shape[0]] = t
    return out


def collate_acoustic(batch: list[dict[str, Any]], frames_multiple: int = 1) -> dict[str, Any]:
    """Batch :class:`AcousticDataset` items.

    Returns ``ids`` ``[B, T]`` (padded with PAD_ID 0) and ``id_lengths``; ``mel`` ``[B, F, N_MELS]``
    (padded with ``SILENCE_LOG_MEL``, ``F`` rounded up to ``frames_multiple``) and ``mel_lengths``;
    ``stop`` ``[B, F]`` float, 1 from each utterance's last frame on; ``ref_mel`` / ``ref_lengths``
    likewise; ``voice_index``, ``emotion_index`` ``[B]``; and the lists ``id``, ``ref_id``, ``voice``,
    ``emotion``.
    """
    mel_lengths = torch.tensor([item["mel"].shape[0] for item in batch])
    mel = _pad([item["mel"] for item in batch], audio.SILENCE_LOG_MEL, frames_multiple)
    stop = (torch.arange(mel.shape[1])[None, :] >= (mel_lengths[:, None] - 1)).float()
    return {
        "ids": _pad([item["ids"] for item in batch], PAD_ID),
        "id_lengths": torch.tensor([len(item["ids"]) for item in batch]),
        "mel": mel,
        "mel_lengths": mel_lengths,
        "stop": stop,
        "ref_mel": _pad([item["ref_mel"] for item in batch], audio.SILENCE_LOG_MEL),
        "ref_lengths": torch.tensor([item["ref_mel"].shape[0] for item in batch]),
        "voice_index": torch.tensor([item["voice_index"] for item in batch]),
        "emotion_index": torch.tensor([item["emotion_index"] for item in batch]),
        **{key: [item[key] for item in batch] for key in ("id", "ref_id", "voice", "emotion")},
    }


class VocoderDataset(torch.utils.data.Dataset):
    """Aligned ``(mel [segment_frames, N_MELS], audio [segment_frames * HOP_LENGTH])`` float32 pairs.

    Frame ``f`` of the mel covers samples ``[f * HOP_LENGTH, (f + 1) * HOP_LENGTH)``. The segment start
    is drawn per ``(seed, epoch, index)``; an utterance shorter than the segment is padded with
    ``SILENCE_LOG_MEL`` frames and zero samples. ``segment_frames=None`` gives whole utterances.
    """

    def __init__(self, root: str | Path | Corpus, split: str, segment_frames: int | None, seed: int = 0) -> None:
        self.corpus = root if isinstance(root, Corpus) else Corpus(root)
        self.entries = self.corpus.split(split)
        if not self.entries:
            raise ValueError(f"{self.corpus.root} has no {split!r} utterances")
        self.segment_frames, self.seed, self.epoch = segment_frames, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        e = self.entries[index]
        hop, frames, scale = audio.HOP_LENGTH, self.segment_frames, float(self.corpus.summary["audio_scale"])
        if frames is None:
            start, stop = 0, e.n_frames
        else:
            start = int(_rng(self.seed, self.epoch, index).integers(max(e.n_frames - frames, 0) + 1))
            stop = start + frames
        mel = self.corpus.mel(e)[start:stop].astype(np.float32)
        samples = self.corpus.audio(e)[start * hop : stop * hop].astype(np.float32) / scale
        if frames is None:
            return torch.from_numpy(mel), torch.from_numpy(samples)
        if mel.shape[0] < frames:
            fill = np.full((frames - mel.shape[0], mel.shape[1]), audio.SILENCE_LOG_MEL, np.float32)
            mel = np.concatenate([mel, fill])
            samples = np.pad(samples, (0, frames * hop - samples.shape[0]))
        return torch.from_numpy(mel), torch.from_numpy(np.ascontiguousarray(samples))
