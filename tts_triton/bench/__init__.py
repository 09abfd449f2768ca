"""``tts-triton bench``: the benchmark of a served ``tts`` model (see :mod:`tts_triton.bench.sweep`).

Modules: :mod:`~tts_triton.bench.workload` (the sentence set, request record and repeat-ratio texts, shared with
the Locust load test), :mod:`~tts_triton.bench.stats` (levels, summaries, Triton statistics),
:mod:`~tts_triton.bench.prometheus` (the metrics page), :mod:`~tts_triton.bench.load` (the load generator),
:mod:`~tts_triton.bench.baseline` (the eager baseline), :mod:`~tts_triton.bench.goals` (goals from a file),
:mod:`~tts_triton.bench.report`, :mod:`~tts_triton.bench.describe` (host and server), :mod:`~tts_triton.bench.plot`
and :mod:`~tts_triton.bench.sweep`. Benches of one behaviour each, run as modules:
:mod:`~tts_triton.bench.first_request` (a fresh server's first requests), :mod:`~tts_triton.bench.heavy_request`
(a stream beside a request at the length limits) and :mod:`~tts_triton.bench.compare` (two runs side by side).
Importing the package is cheap (the Locust workers import the workload).
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``tts-triton bench ARGS``: see :func:`tts_triton.bench.sweep.main`."""
    from tts_triton.bench.sweep import main as run

    return run(argv)
