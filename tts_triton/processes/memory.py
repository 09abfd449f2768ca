"""What a request leaves in the server's memory once it has ended, rejected requests included.

Three guards, applied by :class:`tts_triton.processes.triton_server.TritonServer` and, in the serving image and the Helm
chart, by ``python -m tts_triton.processes.memory tritonserver ARGS...`` (applies them, then execs the server):

- **Allocator**: tritonserver (and the stubs it starts) run with jemalloc through ``LD_PRELOAD``, set to hand
  freed pages back within a second (:data:`ALLOCATORS`); glibc's malloc kept most of each large request.
  When the library is missing the server runs with glibc's and a warning says so.
- **gRPC request pool**: :data:`SERVER_ARGS` turn off Triton's pool of finished gRPC request objects, each
  of which otherwise keeps the capacity of the largest request it held (8 of them by default).
- **Shared-memory region cap**: the Python backend copies a request's inputs into its model instance's
  region in ``/dev/shm`` before the model sees them, and a region never shrinks. tritonserver runs with a soft
  ``RLIMIT_FSIZE`` of ``shm_region_limit_mb`` (SIGXFSZ ignored), so the backend cannot grow a region past it:
  a request whose inputs do not fit is refused before anything is copied ("Failed to increase the shared
  memory pool size ... File too large"). The cap covers everything in flight in one instance at once (each
  open stream keeps its reference audio there). The stubs of this package's models lift the limit for
  themselves (:func:`lift_file_size_limit`), so outputs (a whole ``tts_offline`` utterance) may still grow a
  region. The limit applies to every file tritonserver writes, its log too (see :func:`rotate_log`).
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

__all__ = [
    "ALLOCATORS",
    "DEFAULT_ALLOCATOR",
    "GLIBC",
    "SERVER_ARGS",
    "SHM_REGION_LIMIT_MB",
    "allocator_environment",
    "allocator_of",
    "configured",
    "find_library",
    "lift_file_size_limit",
    "limit_file_size",
    "rotate_log",
]

log = logging.getLogger(__name__)

#: Allocator name -> (shared library, settings it reads from the environment; the caller's own win).
#: jemalloc: a background thread returns dirty pages after 1 s and keeps none "muzzy", so a finished 115 MB
#: request is handed back to the kernel within about a second (docs/records/bench/rejected-requests.md).
ALLOCATORS: dict[str, tuple[str, dict[str, str]]] = {
    "jemalloc": ("libjemalloc.so.2", {"MALLOC_CONF": "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"}),
    "tcmalloc": ("libtcmalloc_minimal.so.4", {}),
}
#: The C library's own malloc: no preload.
GLIBC = "glibc"
DEFAULT_ALLOCATOR = "jemalloc"
#: Largest size of one Python-backend shared-memory region, MiB (0: no cap). Above the largest legitimate
#: batch's inputs (a decoder batch of 64 sentences of 512 tokens: 50 MB) and below any request worth refusing.
SHM_REGION_LIMIT_MB = 64
#: tritonserver options of the guards (later options on the command line override them).
SERVER_ARGS = ("--grpc-infer-allocation-pool-size=0",)
#: Environment variables read by ``python -m tts_triton.processes.memory``: the allocator and the region cap in MiB.
ALLOCATOR_ENV, SHM_LIMIT_ENV = "TTS_TRITON_ALLOCATOR", "TTS_TRITON_SHM_REGION_MB"


def configured(env: Mapping[str, str]) -> tuple[str, int]:
    """The allocator and the region cap (MiB) that ``env`` asks for (:data:`ALLOCATOR_ENV`, :data:`SHM_LIMIT_ENV`),
    else the defaults; ``ValueError`` naming the variable for a cap that is not a whole number >= 0."""
    value = env.get(SHM_LIMIT_ENV, str(SHM_REGION_LIMIT_MB))
    if not value.strip().isdigit():
        raise ValueError(f"{SHM_LIMIT_ENV} must be a whole number of MiB (0: no cap), not {value!r}")
    return env.get(ALLOCATOR_ENV, DEFAULT_ALLOCATOR), int(value)


def find_library(name: str, library_path: str = "") -> Path | None:
    """The shared library ``name`` in the folders of ``library_path`` (``LD_LIBRARY_PATH``'s form: the GPU host's
    unpacked Debian packages, scripts/gpu/espeak-env.sh), then in the system's library folders, or None."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    folders = [*filter(None, library_path.split(":")),
               f"/usr/lib/{multiarch}", f"/lib/{multiarch}", "/usr/lib64", "/usr/lib", "/usr/local/lib"]
    return next((Path(d) / name for d in folders if (Path(d) / name).is_file()), None)


def allocator_environment(allocator: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to ``env`` so that a process runs with ``allocator`` (a key of :data:`ALLOCATORS`
    or :data:`GLIBC`): ``LD_PRELOAD`` (ahead of ``env``'s own) and its settings unless ``env`` has them. Empty for
    glibc, and when the library is not installed (a warning names the package to install)."""
    if allocator == GLIBC:
        return {}
    if allocator not in ALLOCATORS:
        raise ValueError(f"the allocator ({ALLOCATOR_ENV}) must be one of {[*ALLOCATORS, GLIBC]}, not {allocator!r}")
    library, settings = ALLOCATORS[allocator]
    path = find_library(library, env.get("LD_LIBRARY_PATH", ""))
    if path is None:
        log.warning("%s not found (Debian/Ubuntu package %s): tritonserver runs with glibc's malloc, which keeps "
                    "memory of large requests", library, "libjemalloc2" if allocator == "jemalloc"
                    else "libtcmalloc-minimal4")
        return {}
    preload = " ".join(filter(None, [str(path), env.get("LD_PRELOAD")]))
    return {"LD_PRELOAD": preload, **{k: v for k, v in settings.items() if k not in env}}


def allocator_of(pid: int) -> str | None:
    """The allocator process ``pid`` runs with: the :data:`ALLOCATORS` name whose library it has mapped, else
    :data:`GLIBC`; None when its memory map cannot be read (gone, or another user's)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return next((name for name, (library, _) in ALLOCATORS.items() if f"/{library}" in maps), GLIBC)


def limit_file_size(limit_mb: int) -> None:
    """Cap the size of the files this process (and what it execs) may grow to ``limit_mb`` MiB, soft limit only
    (a child may raise it again: :func:`lift_file_size_limit`); growing one past it fails with EFBIG instead of
    SIGXFSZ killing the process. No cap for 0. For the server process, just before exec."""
    if limit_mb <= 0:
        return
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # kept across exec: ignored signals stay ignored
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    soft = limit_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def lift_file_size_limit() -> None:
    """Raise this process's file-size soft limit to its hard limit: a model's stub undoing the server's cap for
    its own allocations (its outputs may grow its region)."""
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))


def rotate_log(path: Path, limit_mb: int) -> None:
    """Move ``path`` to ``path.1`` (replacing it) when it holds over half of ``limit_mb``: the server cannot append
    past its file-size cap. Nothing for a missing file or no cap."""
    if limit_mb > 0 and path.is_file() and path.stat().st_size > (limit_mb << 20) // 2:
        path.replace(path.with_name(path.name + ".1"))


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``python -m tts_triton.processes.memory SERVER [ARGS...]``: exec ``SERVER`` with :data:`SERVER_ARGS` before
    ``ARGS``, with the allocator and the region cap the environment asks for (:func:`configured`)."""
    logging.basicConfig(format="tts_triton.processes.memory: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.exit("usage: python -m tts_triton.processes.memory tritonserver [ARGS...]")
    env = dict(os.environ)
    try:
        allocator, limit_mb = configured(env)
        env |= allocator_environment(allocator, env)
    except ValueError as err:
        sys.exit(f"tts_triton.processes.memory: {err}")
    limit_file_size(limit_mb)
    os.execvpe(args[0], [args[0], *SERVER_ARGS, *args[1:]], env)


if __name__ == "__main__":
    main()
