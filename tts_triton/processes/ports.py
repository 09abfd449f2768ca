"""TCP ports on this host: free ones for a server, and who listens on a taken one (from ``/proc``)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping
from pathlib import Path

__all__ = ["PORTS_ENV", "TCP_LISTEN", "bindable", "command_line", "free_port", "free_ports", "listening_inodes",
           "port_holders", "port_range", "socket_inodes"]

#: Socket state "listening" in /proc/net/tcp.
TCP_LISTEN = "0A"


#: Environment variable ``LOW-HIGH`` (inclusive): the ports :func:`free_port` picks from, for every process that
#: inherits it (``serve``, the test suite's servers). Unset: any port the kernel hands out for port 0.
PORTS_ENV = "TTS_TRITON_PORTS"

#: Lock sockets of the ports this process claimed from the range (abstract Unix sockets, named per port: freed by
#: the kernel when the process ends, no file left behind).
_claims: dict[int, socket.socket] = {}


def port_range(environ: Mapping[str, str] = os.environ) -> range | None:
    """The range :data:`PORTS_ENV` asks for, None when unset; a ValueError naming the variable when malformed."""
    value = environ.get(PORTS_ENV, "").strip()
    if not value:
        return None
    low, sep, high = value.partition("-")
    try:
        ports = range(int(low), int(high) + 1) if sep else range(0)
    except ValueError:
        ports = range(0)
    if not ports or ports.start < 1 or ports.stop > 65536:
        raise ValueError(f"{PORTS_ENV}={value!r}: expected LOW-HIGH, two ports with LOW <= HIGH, e.g. 20000-20999")
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free when asked.

    Without :data:`PORTS_ENV`, the kernel's pick for port 0 (another process may take it before you bind it). With
    it, a port of that range that this process then holds a lock on until it ends: every process that picks ports
    this way skips it, and the kernel hands out no port outside its local port range to anyone else, so a range
    outside that one is yours between the pick and the bind. A port that a listener has bound since is released.
    """
    ports = port_range()
    if ports is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            return sock.getsockname()[1]
    for port, lock in list(_claims.items()):  # bound by now: the listener holds it, the lock is no longer needed
        if listening_inodes(port):
            lock.close()
            del _claims[port]
    start = os.getpid() % len(ports)  # processes start their search apart
    for port in (*ports[start:], *ports[:start]):
        if port in _claims:
            continue
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0tts-triton-port-{port}")
        except OSError:  # another process holds it
            lock.close()
            continue
        if not bindable(host, port):
            lock.close()
            continue
        _claims[port] = lock
        return port
    raise OSError(f"no free port left in {PORTS_ENV}={ports.start}-{ports.stop - 1} ({len(_claims)} held by this "
                  "process): ask for a wider range")


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
