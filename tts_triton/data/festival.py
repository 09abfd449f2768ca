"""Running the ``festival`` found on PATH (Debian ``festival`` and ``festvox-us-slt-hts``: CMU ARCTIC ``slt``
as an HTS voice, a teacher of higher naturalness than flite's ``slt``; licences in docs/teacher.md).

One Scheme script per utterance, in a file: it selects the voice, adds a lexicon addendum (word -> CMU phones with
stress digits, syllabified by festival's own ``lex.syllabify.phstress``), sets the speaking rate and prints the
segments it said. The text is a Scheme string literal, escaped, never part of a command line. Festival passes its
HTS engine the model and the speed (``-r``) only: the voice's F0 is the model's own (:func:`tts_triton.data.
prosody.rendering` moves it for the emotions).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tts_triton.data.espeak import EspeakError, parse_wav
from tts_triton.data.flite import Said

FESTIVAL = "festival"
#: The HTS ``slt`` voice of ``festvox-us-slt-hts`` (32 kHz).
HTS_SLT = "cmu_us_slt_arctic_hts"
#: Marks the line of the script's output that lists the segments said.
_SEGMENTS = "SEGMENTS:"


class FestivalError(RuntimeError):
    """festival is missing, lacks the voice, failed, or wrote something that is not 16-bit mono PCM WAV."""


@functools.lru_cache(maxsize=1)
def festival_binary() -> str:
    """Absolute path of ``festival`` on PATH; raises :class:`FestivalError` when there is none."""
    path = shutil.which(FESTIVAL)
    if path is None:
        raise FestivalError("festival is not on PATH (Debian: apt-get install festival festvox-us-slt-hts)")
    return path


def festival_version() -> str:
    """festival's version (``Festival Speech Synthesis System: 2.5.0:release ...``)."""
    try:
        done = subprocess.run([festival_binary(), "--version"], capture_output=True, timeout=60, check=True)
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
        raise FestivalError(f"festival --version failed: {exc}") from None
    line = done.stdout.decode(errors="replace").strip()
    return line.partition(": ")[2] or line  # after festival's own path


def voices() -> set[str]:
    """Names of the voices festival finds (``voice.list``)."""
    out = _run('(format t "%l\\n" (voice.list))').stdout.decode(errors="replace")
    return set(out.strip().strip("()").split())


def scheme_string(text: str) -> str:
    """``text`` as a Scheme string literal (backslashes and double quotes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def synthesize(text: str, voice: str = HTS_SLT, speed: float = 1.0,
               lexicon: Mapping[str, Sequence[str]] | None = None) -> Said:
    """Speak ``text`` with festival's ``voice`` at ``speed`` (the HTS engine's rate: 1 is the voice's own, 1.25
    a fifth shorter) and a ``lexicon`` addendum (lower-case word -> CMU phones with stress digits, looked up
    before festival's own lexicon). Raises :class:`FestivalError`."""
    if not 0.25 <= speed <= 4.0:
        raise ValueError(f"speed must be in 0.25..4, got {speed}")
    with tempfile.TemporaryDirectory(prefix="festival-") as tmp:
        wav = Path(tmp) / "out.wav"
        lines = [f"(voice_{voice})"]
        for word, phones in (lexicon or {}).items():
            # A word without a vowel (the clitic 's) keeps festival's entry: its post-lexical rule picks s, z or
            # ax z from the phone before and fails on any other pronunciation.
            if any(p[-1:].isdigit() for p in phones):
                stressed = " ".join(phones)
                lines.append(f"(lex.add.entry (list {scheme_string(word)} nil (lex.syllabify.phstress '({stressed}))))")
        lines += [
            f"(set! hts_engine_params (append hts_engine_params (list '(\"-r\" {speed:.6g}))))",
            f"(set! utt1 (utt.synth (eval (list 'Utterance 'Text {scheme_string(text)}))))",
            f"(utt.save.wave utt1 {scheme_string(str(wav))} 'riff)",
            f'(format t "{_SEGMENTS}")',
            "(mapcar (lambda (s) (format t \" %s\" (item.name s))) (utt.relation.items utt1 'Segment))",
            '(format t "\\n")',
        ]
        done = _run("\n".join(lines), Path(tmp))
        try:
            rate, samples = parse_wav(wav.read_bytes())
        except (OSError, EspeakError) as exc:
            raise FestivalError(f"festival voice {voice} wrote no usable WAV: {exc}; "
                                f"{done.stderr.decode(errors='replace').strip()[:300]}") from None
    out = done.stdout.decode(errors="replace")
    segments = next((line.partition(_SEGMENTS)[2].split() for line in out.splitlines() if _SEGMENTS in line), [])
    return Said(rate, samples, segments)


def _run(script: str, folder: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``script`` in festival's batch mode; a Scheme error (exit status 255) raises."""
    with tempfile.TemporaryDirectory(prefix="festival-") as tmp:
        path = Path(folder or tmp) / "script.scm"
        path.write_text(script + "\n", encoding="utf-8")
        try:
            done = subprocess.run([festival_binary(), "-b", str(path)], capture_output=True, timeout=300, check=False)
        except subprocess.TimeoutExpired as exc:
            raise FestivalError("festival timed out") from exc
    if done.returncode != 0:
        raise FestivalError(f"festival failed (exit {done.returncode}): "
                            f"{done.stderr.decode(errors='replace').strip()[:300]}")
    return done
