"""Running the ``festival`` found on PATH (Debian ``festival`` and ``festvox-us-slt-hts``: CMU ARCTIC ``slt``
as an HTS voice, a teacher of higher naturalness than flite's ``slt``; licences in docs/teacher.md) as the front
end of the HTS engine's own command line, ``hts_engine`` (Debian ``htsengine``, hts_engine API 1.10, BSD-style).

One Scheme script per utterance, in a file: it selects the voice, adds a lexicon addendum (word -> CMU phones with
stress digits, syllabified by festival's own ``lex.syllabify.phstress``), runs festival's modules up to the
waveform (which it skips), writes the utterance's HTS full-context labels and prints the segments it said and the
voice's model file. The text is a Scheme string literal, escaped, never part of a command line. ``hts_engine``
then renders the labels with the voice's model and the engine's own prosody controls (:class:`HtsControls`),
which festival does not pass on (its engine call takes the model and ``-r`` only): the F0 contour and durations
stay the model's, moved in level, spread and rate by the same statistical model that made them, with the voice's
own vocoder.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_triton.data.espeak import EspeakError, parse_wav
from tts_triton.data.flite import Said

FESTIVAL = "festival"
HTS_ENGINE = "hts_engine"
#: The HTS ``slt`` voice of ``festvox-us-slt-hts`` (32 kHz).
HTS_SLT = "cmu_us_slt_arctic_hts"
#: Marks the lines of the script's output that list the segments said and name the voice's HTS model file.
_SEGMENTS = "SEGMENTS:"
_MODEL = "HTSVOICE:"


class FestivalError(RuntimeError):
    """festival or hts_engine is missing, festival lacks the voice, either failed, or hts_engine wrote something that
    is not 16-bit mono PCM WAV."""


@dataclass(frozen=True)
class HtsControls:
    """The HTS engine's prosody controls: ``half_tones`` added to every voiced frame's log F0 (``-fm``),
    ``f0_gv_weight`` the weight of log F0's global variance in parameter generation (``-jf``: above 1 the contour
    spreads wider, below 1 narrower, 1 as trained), ``speed`` the speaking rate (``-r``: 1.25 is a fifth shorter)."""

    half_tones: float = 0.0
    f0_gv_weight: float = 1.0
    speed: float = 1.0

    def __post_init__(self) -> None:
        if not 0.25 <= self.speed <= 4.0:
            raise ValueError(f"speed must be in 0.25..4, got {self.speed}")
        if not -12.0 <= self.half_tones <= 12.0:
            raise ValueError(f"half_tones must be in -12..12, got {self.half_tones}")
        if not 0.0 <= self.f0_gv_weight <= 4.0:
            raise ValueError(f"f0_gv_weight must be in 0..4, got {self.f0_gv_weight}")

    def arguments(self) -> list[str]:
        """``hts_engine``'s options for these controls."""
        return ["-fm", f"{self.half_tones:.6g}", "-jf", f"{self.f0_gv_weight:.6g}", "-r", f"{self.speed:.6g}"]


#: The voice as trained.
AS_TRAINED = HtsControls()


@functools.lru_cache(maxsize=2)
def _binary(name: str, package: str) -> str:
    """Absolute path of ``name`` on PATH; raises :class:`FestivalError` naming the Debian ``package`` when none."""
    path = shutil.which(name)
    if path is None:
        raise FestivalError(f"{name} is not on PATH (Debian: apt-get install {package})")
    return path


def hts_engine_binary() -> str:
    """Absolute path of ``hts_engine`` on PATH; raises :class:`FestivalError` when there is none."""
    return _binary(HTS_ENGINE, "htsengine")


def festival_binary() -> str:
    """Absolute path of ``festival`` on PATH; raises :class:`FestivalError` when there is none."""
    return _binary(FESTIVAL, "festival festvox-us-slt-hts")


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


def synthesize(text: str, voice: str = HTS_SLT, controls: HtsControls = AS_TRAINED,
               lexicon: Mapping[str, Sequence[str]] | None = None) -> Said:
    """Speak ``text`` with festival's HTS ``voice`` under the engine's ``controls`` and a ``lexicon`` addendum
    (lower-case word -> CMU phones with stress digits, looked up before festival's own lexicon). Raises
    :class:`FestivalError`."""
    with tempfile.TemporaryDirectory(prefix="festival-") as tmp:
        labels, wav = Path(tmp) / "utt.lab", Path(tmp) / "out.wav"
        lines = [f"(voice_{voice})", f'(format t "{_MODEL} %s\\n" (cadr (assoc_string "-m" hts_engine_params)))']
        for word, phones in (lexicon or {}).items():
            # A word without a vowel (the clitic 's) keeps festival's entry: its post-lexical rule picks s, z or
            # ax z from the phone before and fails on any other pronunciation.
            if any(p[-1:].isdigit() for p in phones):
                stressed = " ".join(phones)
                lines.append(f"(lex.add.entry (list {scheme_string(word)} nil (lex.syllabify.phstress '({stressed}))))")
        lines += [
            "(Parameter.set 'Synth_Method (lambda (utt) utt))",  # the labels are all it needs; hts_engine renders
            f"(set! utt1 (utt.synth (eval (list 'Utterance 'Text {scheme_string(text)}))))",
            f"(hts_dump_feats utt1 hts_feats_list {scheme_string(str(labels))})",
            f'(format t "{_SEGMENTS}")',
            "(mapcar (lambda (s) (format t \" %s\" (item.name s))) (utt.relation.items utt1 'Segment))",
            '(format t "\\n")',
        ]
        out = _run("\n".join(lines), Path(tmp)).stdout.decode(errors="replace")
        model = _field(out, _MODEL)
        if not model or not labels.exists():
            raise FestivalError(f"festival voice {voice} gave no HTS model or labels (is it an HTS voice?)")
        command = [hts_engine_binary(), "-m", model[0], *controls.arguments(), "-ow", str(wav), str(labels)]
        try:
            done = subprocess.run(command, capture_output=True, timeout=300, check=False)
        except subprocess.TimeoutExpired as exc:
            raise FestivalError("hts_engine timed out") from exc
        try:
            rate, samples = parse_wav(wav.read_bytes())
        except (OSError, EspeakError) as exc:
            raise FestivalError(f"hts_engine wrote no usable WAV for voice {voice} (exit {done.returncode}): {exc}; "
                                f"{done.stderr.decode(errors='replace').strip()[:300]}") from None
    return Said(rate, samples, _field(out, _SEGMENTS))


def _field(out: str, mark: str) -> list[str]:
    """The words after ``mark`` on the first line of ``out`` that holds it ([] when none does)."""
    return next((line.partition(mark)[2].split() for line in out.splitlines() if mark in line), [])


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
