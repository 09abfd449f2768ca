"""Running the ``flite`` found on PATH (Debian package ``flite``; CMU, BSD-style licence) as a subprocess.

The text goes in a file (never on the command line), an optional lexicon addendum in another (``-add_lex``),
features with ``--setf``; flite writes a WAV file and prints the segments it said (``-ps``) on stdout.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_triton.data.cmu import addenda_text
from tts_triton.data.espeak import EspeakError, parse_wav

FLITE = "flite"
#: The rate flite's clustergen voices (slt, awb, rms) speak at: their renderings hold nothing above half of it.
VOICE_RATE = 16000


class FliteError(RuntimeError):
    """flite is missing, failed, refused a lexicon entry, or wrote something that is not 16-bit mono PCM WAV."""


@functools.lru_cache(maxsize=1)
def flite_binary() -> str:
    """Absolute path of ``flite`` on PATH; raises :class:`FliteError` when there is none."""
    path = shutil.which(FLITE)
    if path is None:
        raise FliteError("flite is not on PATH (Debian: apt-get install flite; on the GPU host: "
                         "source scripts/gpu/espeak-env.sh, whose bundle carries flite)")
    return path


def flite_version() -> str:
    """flite's version line (``version: flite-2.2-current ...``)."""
    out = _run(["--version"], check=False).stdout.decode(errors="replace")  # flite 2.2 exits 1 after printing it
    return next((line.strip() for line in out.splitlines() if "version" in line), out.strip())


def voices() -> set[str]:
    """Names of the voices compiled into this flite (``flite -lv``)."""
    out = _run(["-lv"]).stdout.decode(errors="replace")
    return set(out.partition(":")[2].split())


@dataclass(frozen=True)
class Said:
    """One flite rendering: int16 ``samples`` at ``rate`` and the ``segments`` flite said, pauses included."""

    rate: int
    samples: np.ndarray
    segments: list[str]


def synthesize(text: str, voice: str, features: Mapping[str, float] | None = None,
               lexicon: Mapping[str, Sequence[str]] | None = None) -> Said:
    """Speak ``text`` with flite ``voice``, float ``features`` (``--setf``) and a ``lexicon`` addendum
    (word -> CMU phones with stress digits, looked up before flite's own lexicon)."""
    with tempfile.TemporaryDirectory(prefix="flite-") as tmp:
        src, wav, lex = Path(tmp) / "text.txt", Path(tmp) / "out.wav", Path(tmp) / "lex.txt"
        src.write_text(text, encoding="utf-8")
        args = ["-voice", voice]
        for name, value in (features or {}).items():
            args += ["--setf", f"{name}={value:.6g}"]
        if lexicon:
            lex.write_text(addenda_text({k: list(v) for k, v in lexicon.items()}), encoding="utf-8")
            args += ["-add_lex", str(lex)]
        done = _run([*args, "-ps", "-f", str(src), "-o", str(wav)])
        # flite reports a bad addendum line on stdout or stderr and goes on without it
        report = (done.stdout + done.stderr).decode(errors="replace")
        if "add_addenda" in report:
            raise FliteError(f"flite refused the lexicon addendum: {report.strip()[:300]}")
        try:
            rate, samples = parse_wav(wav.read_bytes())
        except (OSError, EspeakError) as exc:
            raise FliteError(f"flite -voice {voice} wrote no usable WAV: {exc}") from None
    return Said(rate, samples, done.stdout.decode(errors="replace").split())


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Band-limited resampling of a whole utterance by its FFT (float32 out).

    numpy only: the corpus renders with the GPU host's own Python, which need not have scipy. The
    utterance is treated as periodic, which is harmless here: flite's output starts and ends in silence.
    """
    x = np.asarray(samples, dtype=np.float64)
    if rate == target:
        return x.astype(np.float32)
    n_out = int(round(len(x) * target / rate))
    spectrum = np.fft.rfft(x)
    bins = n_out // 2 + 1
    out = np.zeros(bins, dtype=complex)
    keep = min(bins, len(spectrum))
    out[:keep] = spectrum[:keep]
    return (np.fft.irfft(out, n_out) * (n_out / len(x))).astype(np.float32)


def _run(args: list[str], check: bool = True) -> subprocess.CompletedProcess[bytes]:
    try:
        done = subprocess.run([flite_binary(), *args], capture_output=True, timeout=120, check=False)
    except subprocess.TimeoutExpired as exc:
        raise FliteError(f"flite {' '.join(args)} timed out") from exc
    if check and done.returncode != 0:
        raise FliteError(f"flite {' '.join(args)} exited with {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()}")
    return done
