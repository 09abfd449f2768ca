"""The teacher/copy-synthesis hybrids of tts_triton.evaluate.hybrids: what each hybrid takes from which side, and
the paired table."""

from __future__ import annotations

import numpy as np
import pytest

from tts_triton.evaluate import hybrids, naturalness

RATE = 22050


def tone(hz: float, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x ** 2)))


def band_energy(x: np.ndarray, lo: float, hi: float) -> float:
    spec = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / RATE)
    return float(spec[(freqs >= lo) & (freqs < hi)].sum() / spec.sum())


def test_hybrids_of_one_clip_are_that_clip() -> None:
    x = np.random.default_rng(2).normal(scale=0.1, size=RATE).astype(np.float32)
    clips = hybrids.hybrids(x, x.copy(), RATE)
    assert len(clips) == 4 + 2 * len(hybrids.BANDS)
    assert [label for label, clip in clips.items() if not np.allclose(clip, x, rtol=0, atol=1e-5)] == []


def test_each_hybrid_takes_its_part_from_the_copy() -> None:
    teacher, copy = tone(500), tone(3000)
    out = hybrids.hybrids(teacher, copy, RATE)
    assert band_energy(out["teacher (through the STFT)"], 400, 600) > 0.99
    assert band_energy(out["copy synthesis (through the STFT)"], 2900, 3100) > 0.99
    # the copy's 2.5-5 kHz band joins the teacher's tone; its empty 0-1 kHz band replaces the teacher's tone
    mixed = out["teacher, copy synthesis's 2500-5000 Hz"]
    assert 0.4 < band_energy(mixed, 400, 600) < 0.6 and 0.4 < band_energy(mixed, 2900, 3100) < 0.6
    assert rms(out["teacher, copy synthesis's 0-1000 Hz"]) < 0.02 * rms(teacher)  # -34 dB: only the clip's edges
    assert band_energy(out["copy synthesis, teacher's 0-1000 Hz"], 400, 600) > 0.4
    # the magnitude decides which tone is there; a phase from elsewhere smears it but brings no tone of its own
    smeared = out["teacher's spectrum, copy synthesis's phase"]
    assert band_energy(smeared, 400, 600) > 0.6 and band_energy(smeared, 2900, 3100) < 0.01


def test_table_pairs_every_system_with_the_teacher() -> None:
    table = hybrids.table({"teacher": [3.0, 4.0, 3.5], "copy": [2.0, 3.5, 3.5]})
    assert "| teacher | 3.50 ± 0.29 | +0.00 ± 0.00 | 0 |" in table
    assert "| copy | 3.00 ± 0.50 | -0.50 ± 0.29 | 2 |" in table


@pytest.mark.parametrize("module", [hybrids, naturalness])
def test_judged_runs_refuse_a_sentence_count_outside_the_held_out_set(module: object,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        module.main(["--sentences", "99"])  # type: ignore[attr-defined]
    assert "--sentences: 99: the held-out set has 1 to 72" in capsys.readouterr().err


def test_phase_distances_of_a_copy_by_band() -> None:
    teacher = tone(120) + tone(2400)
    same = hybrids.phase(teacher, teacher.copy(), RATE)
    assert set(same) == {f"{t}, {b}" for t in ("instantaneous phase", "group delay", "instantaneous frequency")
                         for b in ("all bins", "below 1000 Hz")}
    assert max(same.values()) < 1e-3
    # the upper tone turned half a turn: its absolute phase is off everywhere, but not below 1 kHz
    turned = hybrids.phase(teacher, tone(120) - tone(2400), RATE)
    assert turned["instantaneous phase, all bins"] > 0.5 and turned["instantaneous phase, below 1000 Hz"] < 0.01
    table = hybrids.phase_table({"group delay, all bins": [0.2, 0.4], "group delay, below 1000 Hz": [0.1, 0.1]})
    assert "| group delay | 0.300 ± 0.100 | 0.100 ± 0.000 |" in table
