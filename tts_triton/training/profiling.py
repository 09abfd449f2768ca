"""Where a training step's time goes: ``--profile N`` records N steps with PyTorch's profiler.

The table lists operators by their own time on the device (on the CPU when the run has no GPU), and its
header compares the device's busy time per step with the wall-clock time per step: a step whose wall time is
far above its device time is bound by the host (kernel launches, Python, the data loader), not the GPU.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

#: Steps left alone before recording, at least: cuDNN autotuning, compilation and allocator growth happen there.
SKIP_STEPS = 20
#: Steps recorded but discarded, so that the profiler's own start-up is not counted.
WARMUP_STEPS = 2


class StepProfiler:
    """Records ``steps`` steps of a run after the first ``skip + WARMUP_STEPS`` (call :meth:`step` after each),
    then writes the operator table to ``path``."""

    def __init__(self, path: Path, steps: int, device: torch.device, skip: int = SKIP_STEPS) -> None:
        self.path, self.steps, self.skip, self.cuda = path, steps, skip, device.type == "cuda"
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if self.cuda else [])]
        self.started: float | None = None
        self.profiler = profile(activities=activities, on_trace_ready=self._write,
                                schedule=schedule(wait=skip, warmup=WARMUP_STEPS, active=steps, repeat=1))
        self.profiler.start()
        self.taken, self.running = 0, True

    def step(self) -> None:
        """One step is done: advance the schedule; stops the profiler once its steps are recorded."""
        if not self.running:
            return
        if self.cuda:
            torch.cuda.synchronize()  # so that the wall clock brackets the recorded steps' device work
        self.taken += 1
        if self.taken == self.skip + WARMUP_STEPS:
            self.started = time.perf_counter()
        self.profiler.step()
        self.running = self.taken < self.skip + WARMUP_STEPS + self.steps
        if not self.running:
            self.profiler.stop()

    def close(self) -> None:
        """Stop recording (a run that ended before its recorded steps writes no table)."""
        if self.running:
            self.running = False
            self.profiler.stop()

    def _write(self, prof: profile) -> None:
        if self.started is None or self.taken < self.skip + WARMUP_STEPS + self.steps:
            return  # stopped early: too few steps for a table
        wall_ms = (time.perf_counter() - self.started) * 1e3 / self.steps
        events = prof.key_averages()
        where = "device" if self.cuda else "cpu"
        if self.cuda:  # the kernels' own rows: an operator's device time is its kernels' again, and the steps'
            # spans on the device ("ProfilerStep*") are not work
            busy_us = sum(e.self_device_time_total for e in events
                          if e.device_type == DeviceType.CUDA and not e.key.startswith("ProfilerStep"))
        else:
            busy_us = sum(e.self_cpu_time_total for e in events)
        busy_ms = busy_us / 1e3 / self.steps
        header = (f"{self.steps} steps: wall {wall_ms:.1f} ms per step, {where} busy {busy_ms:.1f} ms per step "
                  f"({busy_ms / wall_ms:.0%})\n")
        self.path.write_text(header + events.table(sort_by=f"self_{where}_time_total", row_limit=40) + "\n")
        print(f"[profile] {header.strip()} -> {self.path}", flush=True)
