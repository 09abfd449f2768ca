"""One progress printer for long work: ``label: done/total, elapsed, ETA[; detail]``.

    progress = ProgressLine("synthesize", total=len(items))
    for item in items:
        ...
        progress.advance()
    progress.close()

On a terminal the line is rewritten in place (at most every ``every`` seconds, default 1); elsewhere (a log
file) a new line is printed at most every ``every`` seconds (default 10). The last step always prints.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["ProgressLine"]


class ProgressLine:
    """A status line for ``total`` steps (None: unknown, no ETA) on ``stream`` (default stderr)."""

    def __init__(self, label: str, total: int | None = None, *, every: float | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.done = label, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.every = every if every is not None else (1.0 if self.tty else 10.0)
        self.clock = clock
        self.start = self.last = clock()
        self._open = False  # a rewritten line is on the terminal without its newline

    def advance(self, steps: int = 1, detail: str = "") -> None:
        """``steps`` more are done."""
        self.update(self.done + steps, detail)

    def update(self, done: int, detail: str = "", *, force: bool = False) -> None:
        """``done`` steps are done; print when ``every`` seconds passed since the last line, at the end, or with
        ``force``."""
        self.done = done
        now = self.clock()
        finished = self.total is not None and done >= self.total
        if force or finished or now - self.last >= self.every:
            self.last = now
            self._print(self.line(detail), end=finished)

    def line(self, detail: str = "") -> str:
        """The current status text."""
        elapsed = self.clock() - self.start
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        eta = ""
        if self.total is not None and 0 < self.done < self.total:
            eta = f", ETA {elapsed / self.done * (self.total - self.done):.0f} s"
        return f"{self.label}: {count}, {elapsed:.0f} s{eta}" + (f"; {detail}" if detail else "")

    def close(self) -> None:
        """End a line left open on a terminal."""
        if self._open:
            print(file=self.stream, flush=True)
            self._open = False

    def _print(self, text: str, end: bool) -> None:
        if self.tty:
            print(f"\r{text}   ", end="\n" if end else "", file=self.stream, flush=True)
            self._open = not end
        else:
            print(text, file=self.stream, flush=True)
