"""Children started through fork() while other threads are inside gRPC: the entry points turn gRPC's fork handlers
off (``tts_triton.processes.exec_after_fork_only``), which otherwise abort some of those children before they exec
(a tritonserver started beside a test's gRPC clients died at start that way)."""

from __future__ import annotations

import os
import subprocess
import sys

from tts_triton.processes import GRPC_FORK_SUPPORT

# A process as `tts-triton` starts: the CLI imported first, then gRPC busy on four threads while the main thread
# starts 200 children the way the launchers do (fork, a preexec_fn, exec). Prints the children's exit codes.
CHILDREN = """
import collections, subprocess, sys, threading
from concurrent import futures

import tts_triton.cli  # noqa: F401  (sets gRPC's fork switch before grpc is imported)
import grpc

server = grpc.server(futures.ThreadPoolExecutor(4))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
done = threading.Event()

def call() -> None:
    method = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary("/none/Method")
    while not done.is_set():
        try:
            method(b"", timeout=1)
        except grpc.RpcError:
            pass

for _ in range(4):
    threading.Thread(target=call, daemon=True).start()
codes = collections.Counter(subprocess.Popen(["true"], preexec_fn=lambda: None).wait() for _ in range(200))
done.set()
print(dict(codes))
"""


def test_children_forked_beside_grpc_calls_all_start() -> None:
    env = {k: v for k, v in os.environ.items() if k != GRPC_FORK_SUPPORT[0]}  # as a user's shell has it
    out = subprocess.run([sys.executable, "-c", CHILDREN], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "{0: 200}", out.stdout  # with gRPC's fork handlers on, 1-6 % died (SIGABRT)
