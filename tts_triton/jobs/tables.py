"""Plain tables for reports (GitHub Markdown and padded terminal text), and writing a report."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["markdown_table", "print_report", "text_table", "write_report"]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A GitHub Markdown table; the first ``left`` columns are left-aligned, the others right-aligned.
    ``|`` in cells is escaped."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---" if i < left else "---:" for i in range(len(headers))]
    return "\n".join([line(headers), "|" + "|".join(align) + "|", *(line(r) for r in rows)])


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table padded for a terminal; columns after the first are right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                             strict=True)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def write_report(folder: Path, name: str, lines: Sequence[str]) -> Path:
    """Write ``lines`` as the file ``folder / name`` (the folder made if missing), say where on stderr and return
    its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(lines))
    print(f"report -> {path}", file=sys.stderr)
    return path


def print_report(text: str, out: Path | None) -> None:
    """Print ``text`` and, when ``out`` is given, also write it there (its folder made if missing)."""
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
