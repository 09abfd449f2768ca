"""The project's STFT framing (:mod:`tts_triton.core.audio`) as two fixed modules, exportable to ONNX and TensorRT.

:class:`FrameStft` cuts audio into the frames :func:`~tts_triton.core.audio.mel_spectrogram` analyses (reflect
padding of ``FRAME_PAD`` each side, Hann window, hop ``HOP_LENGTH``) and returns their real and imaginary
spectra; :class:`FrameIstft` is its inverse by weighted overlap-add, ``frames * HOP_LENGTH`` samples for
``frames`` frames, exact for any spectra :class:`FrameStft` produced. Both are strided convolutions with
fixed bases built in float64, held as non-persistent fp32 buffers (nothing in a checkpoint) and computed in
fp32 whatever their inputs' precision or an autocast around them: in fp16 the quiet bins of a spectrum fall
below the format's range, and bf16 keeps 8 bits of each sample (:func:`~tts_triton.models.stages.half_precision`
rebuilds them in fp32 when a stage goes to fp16).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from tts_triton.core import audio

#: Frequency bins of a one-sided spectrum.
BINS = audio.N_FFT // 2 + 1


def _window_and_angles() -> tuple[Tensor, Tensor]:
    """The analysis window, and ``2 pi k n / N_FFT`` for bin ``k`` and sample ``n`` (``[BINS, N_FFT]``), float64."""
    k = torch.arange(BINS, dtype=torch.float64)
    n = torch.arange(audio.N_FFT, dtype=torch.float64)
    return torch.from_numpy(audio.hann_window()).double(), 2 * math.pi * torch.outer(k, n) / audio.N_FFT


class FrameStft(nn.Module):
    """``audio [B, samples] -> (real, imag)``, each ``[B, BINS, samples // HOP_LENGTH]``, fp32."""

    def __init__(self) -> None:
        super().__init__()
        window, angle = _window_and_angles()
        basis = torch.cat([torch.cos(angle), -torch.sin(angle)]) * window  # the windowed rFFT as one convolution
        self.register_buffer("basis", basis.float().unsqueeze(1), persistent=False)

    def forward(self, samples: Tensor) -> tuple[Tensor, Tensor]:
        pad = audio.FRAME_PAD
        with torch.autocast(samples.device.type, enabled=False):
            x = nn.functional.pad(samples.float().unsqueeze(1), (pad, pad), mode="reflect")
            spec = nn.functional.conv1d(x, self.basis, stride=audio.HOP_LENGTH)
        return spec[:, :BINS], spec[:, BINS:]


class FrameIstft(nn.Module):
    """``(real, imag)``, each ``[B, BINS, frames]`` -> audio ``[B, frames * HOP_LENGTH]``, fp32.

    Each frame's inverse rFFT is windowed again and overlap-added; the sum is divided by the window's
    squared overlap, so spectra of :class:`FrameStft` come back as their audio. Output sample ``s`` depends on
    the frames within two hops of it (a window spans four)."""

    def __init__(self) -> None:
        super().__init__()
        window, angle = _window_and_angles()
        weight = torch.full((BINS, 1), 2.0, dtype=torch.float64)  # bins 0 and N_FFT / 2 count once, the others twice
        weight[0] = weight[-1] = 1.0
        basis = torch.cat([weight * torch.cos(angle), -weight * torch.sin(angle)]) * window / audio.N_FFT
        self.register_buffer("basis", basis.float().unsqueeze(1), persistent=False)
        self.register_buffer("window_square", (window**2).float().view(1, 1, -1), persistent=False)

    def forward(self, real: Tensor, imag: Tensor) -> Tensor:
        hop, pad = audio.HOP_LENGTH, audio.FRAME_PAD
        with torch.autocast(real.device.type, enabled=False):
            spec = torch.cat([real.float(), imag.float()], dim=1)
            out = nn.functional.conv_transpose1d(spec, self.basis, stride=hop)
            norm = nn.functional.conv_transpose1d(torch.ones_like(spec[:, :1]), self.window_square, stride=hop)
        return (out / torch.clamp(norm, min=1e-3))[:, 0, pad : pad + real.shape[-1] * hop]
