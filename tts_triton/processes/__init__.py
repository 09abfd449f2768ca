"""Running the server as a process: the Triton launcher and its memory guards, ports and MPS daemon, the
embedded server, ``serve``'s lifecycle (signals, drain), deep health checks, model control and the supervisor."""

import os

#: gRPC's switch for its fork() handlers, and the value that turns them off.
GRPC_FORK_SUPPORT = ("GRPC_ENABLE_FORK_SUPPORT", "false")


def exec_after_fork_only() -> None:
    """Tell gRPC that this process's fork()s are followed by exec at once, unless the environment says otherwise.

    The launchers here start children through fork() (a ``preexec_fn`` sets their parent-death signal), then exec.
    gRPC's fork handlers, on by default, can break such a child while another thread is inside gRPC: a tritonserver
    started beside a test's gRPC clients died at start (SIGABRT, "epoll_wait error: Bad file descriptor" in its log).
    gRPC's own advice for fork-then-exec is to turn them off. gRPC reads this when it is first imported: an entry point
    calls this before anything imports ``grpc``."""
    os.environ.setdefault(*GRPC_FORK_SUPPORT)
