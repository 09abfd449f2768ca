"""The build cache's voice bank follows the shipped one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tts_triton.export import build


def test_the_cached_bank_of_the_shipped_voice_follows_the_shipped_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    shipped_ckpt, shipped_bank = tmp_path / "default_voice.pt", tmp_path / "voice_bank.json"
    shipped_ckpt.write_bytes(b"weights")
    shipped_bank.write_text('{"v": 1}')
    monkeypatch.setattr(build, "DEFAULT_CHECKPOINT", shipped_ckpt)
    monkeypatch.setattr(build, "DEFAULT_VOICE_BANK", shipped_bank)
    cached = tmp_path / "cache" / "abc" / "voice_bank.json"
    assert build.refresh_shipped_bank(shipped_ckpt, cached) and cached.read_text() == '{"v": 1}'
    shipped_bank.write_text('{"v": 2}')  # a new bank ships for the same weights
    assert build.refresh_shipped_bank(shipped_ckpt, cached) and cached.read_text() == '{"v": 2}'
    other = tmp_path / "mine.pt"
    assert not build.refresh_shipped_bank(other, tmp_path / "other" / "voice_bank.json")
    assert not (tmp_path / "other").exists()
