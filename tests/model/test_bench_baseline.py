"""The bench's eager baseline (the full-size networks in a child process): a failure is reported, not fatal."""

from __future__ import annotations

import pytest

from tts_triton.bench.baseline import BaselinePlan, run_baseline


def test_a_failing_baseline_is_reported_not_fatal() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    plan = BaselinePlan("cuda", (1,), requests=1, seconds=1.0, grace=1.0, warmup=0)
    levels, note = run_baseline(plan, print)  # the child cannot move the stages to CUDA
    assert levels == []
    assert note.startswith("**The eager baseline on cuda failed**")
