"""What every command prints to the terminal when it fails: one line, and its exit status."""

from __future__ import annotations

import sys

__all__ = ["fail"]


def fail(message: str) -> int:
    """Print ``error: message`` on standard error and return the exit status 1."""
    print(f"error: {message}", file=sys.stderr)
    return 1
