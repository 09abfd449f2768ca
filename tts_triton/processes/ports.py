"""TCP ports on this host: free ones for a server, and who listens on a taken one (from ``/proc``)."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

__all__ = ["TCP_LISTEN", "bindable", "command_line", "free_port", "free_ports", "listening_inodes", "port_holders",
           "socket_inodes"]

#: Socket state "listening" in /proc/net/tcp.
TCP_LISTEN = "0A"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free when asked (another process may take it before you bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_ports(count: int = 3, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports of :func:`free_port` (HTTP, gRPC and metrics for a server)."""
    ports: list[int] = []
    while len(ports) < count:
        if (port := free_port(host)) not in ports:
            ports.append(port)
    return ports


def listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP ``port`` (any address, IPv4 and IPv6) in this network namespace."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` has open (empty when it is gone or not ours to inspect)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def command_line(pid: int, limit: int = 120) -> str:
    """Process ``pid``'s command line (program name without its folder), cut to ``limit`` characters; "?" when
    it cannot be read."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join([Path(words[0].decode(errors="replace")).name, *(w.decode(errors="replace") for w in words[1:])])
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def port_holders(port: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the processes listening on TCP ``port`` that this user may inspect.

    Empty when the port is free, or held by another user's process or from another network namespace.
    """
    inodes = listening_inodes(port)
    if not inodes:
        return []
    pids = (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return [(pid, command_line(pid)) for pid in sorted(pids) if socket_inodes(pid) & inodes]


def bindable(host: str, port: int) -> bool:
    """Whether a TCP listener could bind ``host:port`` now (``SO_REUSEADDR``, as servers bind)."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            return False
    return True
