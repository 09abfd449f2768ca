"""How well word timestamps (WORDS) cover the speech they time, on the evaluation's test sentences.

    .venv/bin/python scripts/word_coverage.py --sentences 20

Each sentence is synthesized in process (the default voice, the evaluation's voice and emotion for it) with word
timestamps. The audio is cut into mel frames (HOP_LENGTH samples); a frame is *speech* when its energy is within
``--floor-db`` of the utterance's loudest frame. Two figures: the share of all speech energy that lies inside some
word's span, and the share of words whose span is mostly (>= half of its frames) speech.
"""

from __future__ import annotations

import argparse

import numpy as np

from tts_triton.core import audio
from tts_triton.evaluate.measures import select_items
from tts_triton.models.checkpoint import DEFAULT_VOICE_BANK
from tts_triton.serving.voice import Voice


def coverage(samples: np.ndarray, words: list, floor_db: float) -> tuple[float, float, list[bool]]:
    """(speech energy, speech energy inside word spans, per word: is its span mostly speech)."""
    frames = len(samples) // audio.HOP_LENGTH
    energy = (samples[: frames * audio.HOP_LENGTH].reshape(frames, -1) ** 2).mean(1)
    db = 10 * np.log10(energy + 1e-12)
    speech = db > db.max() - floor_db
    inside = np.zeros(frames, bool)
    mostly = []
    for w in words:
        a = int(w.start * audio.SAMPLE_RATE / audio.HOP_LENGTH)
        b = int(np.ceil(w.end * audio.SAMPLE_RATE / audio.HOP_LENGTH))
        inside[a:b] = True
        mostly.append(bool(b > a and speech[a:b].mean() >= 0.5))
    return float(energy[speech].sum()), float(energy[speech & inside].sum()), mostly


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=20, help="evaluation test sentences (default %(default)s)")
    parser.add_argument("--floor-db", type=float, default=40.0, help="speech: within this of the loudest frame")
    args = parser.parse_args()
    voice = Voice.load(bank=DEFAULT_VOICE_BANK)
    total = covered = 0.0
    mostly: list[bool] = []
    for item in select_items(args.sentences):
        speech = voice.synthesize(item.text, item.voice, item.emotion, words=True)
        t, c, m = coverage(speech.audio, speech.words, args.floor_db)
        total, covered, mostly = total + t, covered + c, mostly + m
    print(f"{args.sentences} sentences, {len(mostly)} words: {covered / total:.1%} of the speech energy inside word "
          f"spans; {sum(mostly)}/{len(mostly)} word spans mostly speech")


if __name__ == "__main__":
    main()
