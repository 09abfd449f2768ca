"""Where tts-triton keeps what it generates, independent of the working directory.

Everything lives under ``$XDG_CACHE_HOME/tts-triton`` (default ``~/.cache/tts-triton``), read when called,
so a changed environment (a test's, a service's) takes effect without re-importing.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "default_model_repository"]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tts-triton``, or ``~/.cache/tts-triton``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tts-triton"


def default_model_repository() -> Path:
    """The model repository ``serve``, ``build-repo`` and ``bench`` use unless given one."""
    return cache_dir() / "model_repository"
