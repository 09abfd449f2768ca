"""The runtime targets a model repository can be built for: the one table every command takes
``--target`` from (``build-repo``, ``serve``, ``bench``, ``python -m tts_triton.export.repository``).

A :class:`RuntimeTarget` names only what differs between runtimes (the network models' platform or
Python module, their instance kind, their artifact); the ensemble and the BLS models never change.
``auto`` is not a target but a choice made on the host: :func:`resolve_target` turns it into
``torch-cuda`` when a CUDA GPU and a CUDA build of PyTorch are present, else ``onnxruntime-python``.
Plain Python: importing this module imports neither torch nor ONNX Runtime.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from tts_triton.core.layout import CHECKPOINT_FILE, ONNX_FILE, PLAN_FILE

__all__ = [
    "AUTO",
    "CPU_TARGET",
    "DEFAULT_TARGET",
    "GPU_TARGET",
    "KIND_CPU",
    "KIND_GPU",
    "RUNTIME_TARGETS",
    "RuntimeTarget",
    "TargetChoice",
    "cuda_torch",
    "embedded_targets",
    "resolve_target",
]

KIND_CPU, KIND_GPU = "KIND_CPU", "KIND_GPU"
#: Not a target: "pick one for this host" (see :func:`resolve_target`).
AUTO = "auto"
TORCH_MODULE = "tts_triton.triton.torch_model"
ONNX_MODULE = "tts_triton.triton.onnx_model"


@dataclass(frozen=True)
class RuntimeTarget:
    """How the four networks are served on one runtime.

    ``source`` says where a network's artifact comes from: ``"onnx"``, ``<onnx_dir>/<name>.onnx``
    (checked against the contract); ``"plan"``, ``<engines_dir>/<name>.plan`` (required);
    ``"checkpoint"``, the checkpoint file itself (the PyTorch stages are built from it at load).
    ``python_model`` set means ``backend: "python"`` with a version-dir ``model.py`` that re-exports
    that module's ``TritonPythonModel``; otherwise ``platform`` names a Triton backend.
    ``embedded``: the embedded Triton (nvidia-pytriton's, Python backend only) can serve it, so
    ``serve`` and ``bench`` accept it; the others are for the NGC image. ``cuda_torch``: its models run
    PyTorch on CUDA, so the host needs a CUDA GPU and a CUDA build of PyTorch. ``server_args``: tritonserver
    options the embedded server adds for it (before the caller's own, which win).
    """

    name: str
    instance_kind: str
    artifact: str
    source: str
    platform: str = ""
    python_model: str = ""
    #: Whether the thread-count parameters apply (ONNX Runtime; PyTorch for instances on the CPU).
    cpu_threads: bool = False
    embedded: bool = False
    cuda_torch: bool = False
    server_args: tuple[str, ...] = ()


#: Triton's CUDA memory pool and pinned host pool, off: the torch-cuda networks are Python-backend models that read
#: and answer CPU tensors only, so neither pool is used, and the CUDA pool (64 MiB) is GPU memory held for nothing.
NO_DEVICE_POOLS = ("--cuda-memory-pool-byte-size=0:0", "--pinned-memory-pool-byte-size=0")

RUNTIME_TARGETS: dict[str, RuntimeTarget] = {
    t.name: t
    for t in (
        RuntimeTarget("onnxruntime-python", KIND_CPU, ONNX_FILE, "onnx", python_model=ONNX_MODULE,
                      cpu_threads=True, embedded=True),
        RuntimeTarget("onnxruntime", KIND_GPU, ONNX_FILE, "onnx", platform="onnxruntime_onnx", cpu_threads=True),
        RuntimeTarget("tensorrt", KIND_GPU, PLAN_FILE, "plan", platform="tensorrt_plan"),
        RuntimeTarget("torch-cuda", KIND_GPU, CHECKPOINT_FILE, "checkpoint", python_model=TORCH_MODULE,
                      cpu_threads=True, embedded=True, cuda_torch=True, server_args=NO_DEVICE_POOLS),
    )
}
#: What ``build-repo`` builds unless told otherwise: the CPU repository every host can serve.
DEFAULT_TARGET = "onnxruntime-python"
#: What ``auto`` picks with and without a usable CUDA GPU.
GPU_TARGET, CPU_TARGET = "torch-cuda", DEFAULT_TARGET


def embedded_targets() -> list[str]:
    """The targets the embedded Triton serves (``serve``'s and ``bench``'s choices besides ``auto``)."""
    return [name for name, t in RUNTIME_TARGETS.items() if t.embedded]


@dataclass(frozen=True)
class TargetChoice:
    """A resolved ``--target``: the runtime target's name and why it was chosen, in words."""

    name: str
    reason: str

    @property
    def runtime(self) -> RuntimeTarget:
        return RUNTIME_TARGETS[self.name]


def cuda_torch() -> tuple[bool, str]:
    """Whether PyTorch here is a CUDA build that sees a CUDA GPU, and what was found, in words."""
    if importlib.util.find_spec("torch") is None:
        return False, "PyTorch is not installed"
    import torch  # heavy: imported only when the question is asked

    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} is not a CUDA build"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no CUDA GPU"
    return True, f"torch {torch.__version__} sees {torch.cuda.get_device_name(0)}"


def resolve_target(name: str) -> TargetChoice:
    """``--target NAME`` -> the target to build: ``auto`` becomes :data:`GPU_TARGET` when :func:`cuda_torch`
    says yes, else :data:`CPU_TARGET`; any other name must be in :data:`RUNTIME_TARGETS` (``ValueError``)."""
    if name == AUTO:
        usable, found = cuda_torch()
        return TargetChoice(GPU_TARGET if usable else CPU_TARGET, f"auto: {found}")
    if name not in RUNTIME_TARGETS:
        raise ValueError(f"unknown runtime target {name!r}; choose from {[AUTO, *RUNTIME_TARGETS]}")
    return TargetChoice(name, "asked for")
