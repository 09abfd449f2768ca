"""Mel match: rescale a vocoder's output, band by band and frame by frame, to the mel it was asked for.

A GAN vocoder gets the fine structure right (harmonics, phase, noise) but not exactly the energy of
each mel band, which is what a spectral-envelope measure like MCD sees (docs/records/model-card-runs.md, "The mel
match", has the numbers). :class:`MelMatch` takes the generator's audio, computes its log-mel exactly
as :func:`tts_triton.core.audio.mel_spectrogram` does, and scales its STFT by the ratio of the requested to
the measured mel (per frame; per mel band, spread over the FFT bins through the filterbank's weights,
in the log domain, clipped to ``±max_log_gain``), then inverts the STFT by weighted overlap-add. The
generator's phase and the fine structure inside each band are kept, so the result keeps its
periodicity while its envelope follows the mel. Deterministic, no weights: the STFT and its inverse of
:mod:`tts_triton.models.stft` and two small matrix products, cheap beside the generator, and exported with it.

It is not fp16-safe: in fp16 the band energies of quiet frames fall below the format's smallest
numbers and their logs diverge (the default voice's vocoder stage measured 14 dB SNR against fp32 when
everything ran in fp16, 43 dB with only this step in fp32). So it always computes in fp32, on fp32
buffers, whatever precision its inputs come in; :func:`tts_triton.models.stages.half_precision` keeps
it so when the rest of the stage goes to fp16.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from tts_triton.core import audio
from tts_triton.models.stft import FrameIstft, FrameStft


class MelMatch(nn.Module):
    """``(audio [B, frames * hop], log_mel [B, frames, n_mels]) -> audio [B, frames * hop]``, fp32 out."""

    def __init__(self, max_log_gain: float) -> None:
        super().__init__()
        self.max_log_gain = max_log_gain
        self.stft, self.istft = FrameStft(), FrameIstft()
        fb = torch.from_numpy(np.asarray(audio.mel_filterbank(), dtype=np.float64))  # [n_mels, bins]
        spread = fb / fb.sum(dim=0, keepdim=True).clamp(min=1e-12)  # bin gain = weighted mean of its bands'
        self.register_buffer("filterbank", fb.float(), persistent=False)
        self.register_buffer("spread", spread.float(), persistent=False)

    def forward(self, samples: Tensor, log_mel: Tensor) -> Tensor:
        real, imag = self.stft(samples)
        magnitude = torch.sqrt(real * real + imag * imag + audio.MAGNITUDE_EPS)
        measured = torch.log(torch.clamp(torch.matmul(self.filterbank, magnitude), min=audio.LOG_CLAMP))
        log_gain = torch.clamp(log_mel.float().transpose(1, 2) - measured, -self.max_log_gain, self.max_log_gain)
        gain = torch.exp(torch.matmul(self.spread.t(), log_gain))  # [B, bins, frames]
        return self.istft(real * gain, imag * gain)
