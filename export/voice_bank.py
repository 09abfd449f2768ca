"""Build a voice bank: one style vector per (voice, emotion) preset, and pitch axes, from reference clips.

Each preset's vector is the mean style-encoder output over its clips, except the emotions of the voices of
:data:`EMOTIONS_FROM`, which take a share of another voice's emotion offsets. A voice with pitch variants
(``prosody.Voice.pitch_variants``) also gets a pitch axis: the least-squares slope, per semitone, of the mean style
of its neutral clips rendered at each variant's offset (and at 0). The clips are rendered by each
voice's own teacher (:func:`tts_triton.data.prosody.render`: espeak-ng, flite, or festival's HTS engine) with the
emotions of :mod:`tts_triton.data.prosody`, for a few fixed sentences that are not in the training corpus
(or ``--clips N`` validation sentences of the corpus generator, as the release does). By default the voices
are the ones the checkpoint learned (:attr:`~tts_triton.models.checkpoint.Checkpoint.voices`); ``--voices`` names
others of ``prosody.CORPUS_VOICES``. The bank's default voice follows :data:`DEFAULT_VOICES`.

    python -m tts_triton.export.voice_bank --out voice_bank.json [--checkpoint ckpt.pt] [--voices all]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from tts_triton.core import audio, contract
from tts_triton.core.voices import VoiceBank, from_styles
from tts_triton.data.prosody import NEUTRAL
from tts_triton.models.checkpoint import UNTRAINED_LABEL, Checkpoint, resolve

#: Sentences of the reference clips (written for this purpose; not produced by the corpus generator).
REFERENCE_TEXTS = (
    "The museum opens its doors at nine, and the guides arrive a little earlier.",
    "Would you carry these letters to the station before the evening train?",
    "What a wonderful surprise to find the garden full of flowers!",
)
#: The default voice, by preference: the first of these that the bank holds and its checkpoint learned. So the
#: natural voice (flite's slt) becomes the default with the first checkpoint that learned it; f1 stays the
#: default of checkpoints that know only espeak-ng's voices. Serving, the gateway and clients read the bank's.
DEFAULT_VOICES = ("slt", "f1")
DEFAULT_EMOTION = NEUTRAL
#: Voices whose emotions are another voice's: the presets of ``voice`` are its neutral style plus ``gain`` times
#: ``donor``'s offset of each emotion from the donor's neutral, when both are in the bank. m8 is taught by espeak-ng,
#: whose emotional prosody costs its timbre (DistillMOS on 4 held-out sentences: happy 2.31, surprised 2.45, angry
#: 2.44 from espeak-ng's renderings). slt's offsets, which its natural HTS teacher's emotions taught, served on 30
#: held-out sentences: whole, 2.89, 2.79, 2.84; 0.6 of them, 3.02, 2.96, 3.04, with m8's median F0 4-6 % above
#: neutral's instead of 9-16 % (docs/records/teacher.md, "Fifteenth candidate").
EMOTIONS_FROM: dict[str, tuple[str, float]] = {"m8": ("slt", 0.6)}


def teacher_references(texts: Iterable[str] = REFERENCE_TEXTS, voices: Iterable[str] | None = None,
                       ) -> dict[tuple[str, str], list[np.ndarray]]:
    """Reference clips for every voice x emotion: ``texts`` rendered by each voice's teacher. ``voices`` are
    names of ``prosody.CORPUS_VOICES`` (default: ``prosody.VOICES``, the shipped checkpoint's); an unknown
    name raises ValueError."""
    from tts_triton.data import prosody

    names = list(prosody.VOICES if voices is None else voices)
    check_voices(names)
    texts = list(texts)
    return {(n, e.name): [prosody.render(t, prosody.CORPUS_VOICES[n], e) for t in texts]
            for n in names for e in prosody.EMOTIONS.values()}


def variant_references(texts: Iterable[str] = REFERENCE_TEXTS, voices: Iterable[str] | None = None,
                       ) -> dict[tuple[str, float], list[np.ndarray]]:
    """Neutral reference clips of each of ``voices`` (as :func:`teacher_references`) that has pitch variants, at each
    variant's offset: ``(voice, semitones) -> clips``."""
    from tts_triton.data import prosody

    names = list(prosody.VOICES if voices is None else voices)
    check_voices(names)
    texts = list(texts)
    neutral = prosody.EMOTIONS[prosody.NEUTRAL]
    return {(n, st): [prosody.render(t, prosody.CORPUS_VOICES[n], neutral, st) for t in texts]
            for n in names for st in prosody.CORPUS_VOICES[n].pitch_variants}


def validation_texts(count: int) -> list[str]:
    """The first ``count`` validation sentences of the corpus generator (never trained on; the evaluation
    uses test sentences)."""
    from tts_triton.data.sentences import generate

    return [s.text for s in generate() if s.split == "val"][:count]


def check_voices(names: Sequence[str]) -> None:
    """Raise ValueError naming every one of ``names`` that is not in ``prosody.CORPUS_VOICES``."""
    from tts_triton.data import prosody

    unknown = [n for n in names if n not in prosody.CORPUS_VOICES]
    if unknown:
        raise ValueError(f"unknown voice(s) {', '.join(unknown)}; known: {', '.join(prosody.CORPUS_VOICES)}")


def voice_names(spec: str | None) -> list[str] | None:
    """``--voices``: comma-separated names of ``prosody.CORPUS_VOICES`` or ``all`` for every one of them (an
    unknown name raises ValueError); None stays None, which means the checkpoint's own voices
    (:attr:`~tts_triton.models.checkpoint.Checkpoint.voices`)."""
    from tts_triton.data import prosody

    if spec is None:
        return None
    names = list(prosody.CORPUS_VOICES) if spec == "all" else spec.split(",")
    check_voices(names)
    return names


def choose_default_voice(voices: Sequence[str], learned: Sequence[str]) -> str:
    """The default voice of a bank holding ``voices`` for a checkpoint that learned ``learned``: the first of
    :data:`DEFAULT_VOICES` in both, else the first of ``voices`` it learned, else the first of ``voices``."""
    known = [v for v in voices if v in learned] or list(voices)
    return next((v for v in DEFAULT_VOICES if v in known), known[0])


def build_voice_bank(ckpt: Checkpoint, clips: dict[tuple[str, str], list[np.ndarray]],
                     default_voice: str | None = None, default_emotion: str = DEFAULT_EMOTION,
                     variants: dict[tuple[str, float], list[np.ndarray]] | None = None) -> VoiceBank:
    """Mean style vector of each preset's clips (float audio at SAMPLE_RATE), and a pitch axis for each voice of
    ``variants`` (:func:`variant_references`; its neutral preset is the axis's point at 0 semitones);
    ``default_voice`` None picks :func:`choose_default_voice` of the clips' voices and the checkpoint's."""
    encoder = ckpt.stages()[contract.STYLE_ENCODER]

    def mean_style(samples: list[np.ndarray]) -> np.ndarray:
        with torch.inference_mode():
            vectors = [encoder(torch.from_numpy(audio.mel_spectrogram(x))[None])[0][0].numpy() for x in samples]
        return np.mean(vectors, axis=0)

    styles = {key: mean_style(samples) for key, samples in clips.items()}
    info = {"checkpoint": ckpt.name, "trained": ckpt.trained, "clips_per_preset": len(next(iter(clips.values())))}
    voices = list(dict.fromkeys(v for v, _ in clips))
    for voice, (donor, gain) in EMOTIONS_FROM.items():
        if (voice, NEUTRAL) in styles and (donor, NEUTRAL) in styles:
            for (v, emotion), style in list(styles.items()):
                if v == donor and emotion != NEUTRAL:
                    styles[voice, emotion] = styles[voice, NEUTRAL] + gain * (style - styles[donor, NEUTRAL])
            info.setdefault("emotions_from", {})[voice] = {"donor": donor, "gain": gain}
    bank = from_styles(styles, default_voice or choose_default_voice(voices, ckpt.voices), default_emotion, info)
    for voice in dict.fromkeys(v for v, _ in variants or {}):
        points = {0.0: styles[voice, NEUTRAL]} | {st: mean_style(x) for (v, st), x in variants.items() if v == voice}
        shifts = np.array(list(points), dtype=np.float64)
        stacked = np.stack(list(points.values())).astype(np.float64)
        centred = shifts - shifts.mean()
        slope = centred @ (stacked - stacked.mean(axis=0)) / (centred @ centred)
        bank.pitch_axes[voice] = [round(float(x), 6) for x in slope]
        bank.pitch_span = max(bank.pitch_span, float(np.abs(shifts).max()))
    return bank


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help="checkpoint file (default: the shipped default voice)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--voices", help="comma-separated corpus voices, or 'all' (default: the voices the "
                                         "checkpoint learned)")
    parser.add_argument("--clips", type=int,
                        help="N validation sentences of the corpus generator per preset (the release uses 8; "
                             "default: the three fixed reference sentences)")
    args = parser.parse_args(argv)
    texts = REFERENCE_TEXTS if args.clips is None else validation_texts(args.clips)
    try:
        names = voice_names(args.voices)
    except ValueError as exc:
        parser.error(f"--voices: {exc}")
    ckpt = resolve(args.checkpoint)
    if not ckpt.trained:
        print(f"warning: {UNTRAINED_LABEL}", file=sys.stderr)
    chosen = names or ckpt.voices
    bank = build_voice_bank(ckpt, teacher_references(texts, chosen), variants=variant_references(texts, chosen))
    bank.info["references"] = ("the fixed reference sentences of export.voice_bank" if args.clips is None
                               else f"{args.clips} validation sentences of the corpus generator per preset")
    bank.save(args.out)
    print(f"wrote {args.out}: {len(bank.voices)} voices x {len(bank.emotions)} emotions, default voice "
          f"{bank.default_voice}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
