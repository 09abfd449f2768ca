"""Polling for a condition that another process or thread makes true, shared by the tests."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> float:
    """Poll ``condition()`` every 0.1 s until true; the seconds it took. Fails the test after ``timeout``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"{what} not within {timeout:g} s"
        time.sleep(0.1)
    return time.monotonic() - start
