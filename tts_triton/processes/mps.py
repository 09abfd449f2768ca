"""The CUDA Multi-Process Service (MPS) for one server's model processes.

Triton runs every model instance of the ``torch-cuda`` target in a process of its own. Without MPS the
GPU time-slices between their CUDA contexts, so a decoder call waits out the vocoder's slice; under MPS
their kernels share the GPU at once: sooner first chunks and more throughput (measured with and without it:
docs/records/bench/history.md).

:class:`MpsDaemon` starts ``nvidia-cuda-mps-control -d`` with pipe and log folders of its own (it neither
needs nor disturbs a host-wide daemon) and returns the environment that points CUDA processes at it;
``stop`` tells it to quit. The binary ships with the NVIDIA driver (in a container,
``NVIDIA_DRIVER_CAPABILITIES`` must include ``utility``). The daemon outlives an owner killed by SIGKILL:
``echo quit | nvidia-cuda-mps-control`` with the same ``CUDA_MPS_PIPE_DIRECTORY`` ends it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"


def default_mps(requested: bool | None, cuda_processes: bool) -> tuple[bool, str]:
    """Whether a server runs its models under MPS, and why: as ``requested`` (``--mps``/``--no-mps``), else on
    where its models run on CUDA in processes of their own (``cuda_processes``: the torch-cuda target) and the
    control daemon is installed: the configuration the GPU benchmark measures best."""
    if requested is not None:
        return requested, "asked for" if requested else "--no-mps"
    if not cuda_processes:
        return False, "the models do not run on CUDA"
    if shutil.which(CONTROL) is None:
        return False, f"{CONTROL} is not installed"
    return True, "the default on a GPU, where it serves more; --no-mps turns it off"


class MpsError(RuntimeError):
    """The MPS control daemon is missing or did not start."""


class MpsDaemon:
    """One MPS control daemon with private pipe and log folders under ``root`` (default: a new temp folder)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root else None
        self.env: dict[str, str] = {}
        self._control = CONTROL

    def start(self) -> dict[str, str]:
        """Start the daemon; return the environment variables of its clients. Raises :class:`MpsError`."""
        control = shutil.which(CONTROL)
        if control is None:
            raise MpsError(f"{CONTROL} not found on PATH: it comes with the NVIDIA driver (in a container, set "
                           "NVIDIA_DRIVER_CAPABILITIES=compute,utility)")
        root = self.root or Path(tempfile.mkdtemp(prefix="tts-triton-mps-"))
        env = {"CUDA_MPS_PIPE_DIRECTORY": str(root / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(root / "log")}
        for folder in env.values():
            Path(folder).mkdir(parents=True, exist_ok=True)
        done = subprocess.run([control, "-d"], env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise MpsError(f"{CONTROL} -d failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
        self.env, self._control = env, control
        return dict(env)

    def stop(self) -> None:
        """Tell the daemon to quit (its servers exit once their clients have); idempotent."""
        if not self.env:
            return
        env, self.env = self.env, {}
        subprocess.run([self._control], input="quit\n", env={**os.environ, **env},
                       capture_output=True, text=True, timeout=30, check=False)
