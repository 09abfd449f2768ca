"""Matplotlib figures written as PNG files (matplotlib is optional: the dev, eval and loadtest extras have it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["pyplot", "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the headless Agg backend."""
    import matplotlib  # optional heavy dependency: imported only to plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: Path, *, dpi: int) -> None:
    """Lay ``fig`` out, write it to ``path`` (its folder must exist) and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
