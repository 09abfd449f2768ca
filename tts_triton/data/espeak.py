"""Running the ``espeak-ng`` found on PATH as a subprocess: text on stdin, a WAV on stdout."""

from __future__ import annotations

import functools
import shutil
import struct
import subprocess
from collections.abc import Sequence

import numpy as np


class EspeakError(RuntimeError):
    """espeak-ng is missing, failed, or wrote something that is not 16-bit mono PCM WAV."""


@functools.lru_cache(maxsize=1)
def espeak_binary() -> str:
    """Absolute path of ``espeak-ng`` on PATH; raises :class:`EspeakError` when there is none."""
    path = shutil.which("espeak-ng")
    if path is None:
        raise EspeakError("espeak-ng is not on PATH (on a host without it: source scripts/gpu/espeak-env.sh)")
    return path


def espeak_version() -> str:
    """First line of ``espeak-ng --version``."""
    return _run(["--version"], b"").decode(errors="replace").splitlines()[0].strip()


def variants() -> set[str]:
    """Names of the installed voice variants (``m1``, ``f2``, ...), from ``espeak-ng --voices=variant``."""
    out = _run(["--voices=variant"], b"").decode(errors="replace")
    names = set()
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 5 and fields[4].startswith("!v/"):
            names.add(fields[4][3:])
    return names


def synthesize(text: str, args: Sequence[str] = ()) -> tuple[int, np.ndarray]:
    """Speak ``text`` (passed on stdin, never on the command line) with extra espeak-ng ``args``.

    Returns ``(sample_rate, samples)`` with ``samples`` int16 mono.
    """
    return parse_wav(_run([*args, "--stdout", "--stdin"], text.encode("utf-8")))


def parse_wav(data: bytes) -> tuple[int, np.ndarray]:
    """Parse a RIFF/WAVE byte string of 16-bit mono PCM (espeak-ng streams it with a bogus data size)."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise EspeakError(f"espeak-ng output is not a WAV file ({len(data)} bytes)")
    pos, rate = 12, None
    while pos + 8 <= len(data):
        chunk, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if chunk == b"fmt ":
            fmt, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if (fmt, channels, bits) != (1, 1, 16):
                raise EspeakError(f"expected 16-bit mono PCM, got format {fmt}, {channels} channels, {bits} bits")
        elif chunk == b"data":
            if rate is None:
                raise EspeakError("WAV data chunk before its fmt chunk")
            payload = data[body : min(len(data), body + size)]
            return rate, np.frombuffer(payload[: len(payload) // 2 * 2], dtype="<i2").astype(np.int16)
        pos = body + size + (size & 1)
    raise EspeakError("WAV without a data chunk")


def _run(args: list[str], stdin: bytes) -> bytes:
    try:
        done = subprocess.run([espeak_binary(), *args], input=stdin, capture_output=True, timeout=120, check=False)
    except subprocess.TimeoutExpired as exc:
        raise EspeakError(f"espeak-ng {' '.join(args)} timed out") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise EspeakError(f"espeak-ng {' '.join(args)} exited with {done.returncode}: {message}")
    return done.stdout
