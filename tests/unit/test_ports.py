"""The ports servers are started on (``free_port``): from the range ``TTS_TRITON_PORTS`` asks for, each held by one
process from its pick until a listener binds it; the suite's default range lies outside the kernel's local one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import default_test_ports

from tts_triton.processes import ports

#: Where the tests below look for a quiet run of ports: under both the suite's default range and the local one.
QUIET_FROM = 15000


def quiet_range(count: int) -> range:
    """``count`` consecutive ports that nothing listens on."""
    for low in range(QUIET_FROM, QUIET_FROM + 1000, count):
        if all(ports.bindable("127.0.0.1", port) for port in range(low, low + count)):
            return range(low, low + count)
    raise AssertionError(f"no {count} free ports in a row from {QUIET_FROM}")


@pytest.fixture
def claims(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[int, socket.socket]]:
    """This test's claims, released after it (the session's own are left alone)."""
    own: dict[int, socket.socket] = {}
    monkeypatch.setattr(ports, "_claims", own)
    yield own
    for lock in own.values():
        lock.close()


def _picks_in_a_child(count: int) -> subprocess.CompletedProcess[str]:
    code = (f"from tts_triton.processes.ports import free_port\nfor _ in range({count}):\n"
            "    print(free_port(), flush=True)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_ports_come_from_the_asked_range_and_another_process_takes_none_of_them(
        claims: dict[int, socket.socket], monkeypatch: pytest.MonkeyPatch) -> None:
    asked = quiet_range(4)
    monkeypatch.setenv(ports.PORTS_ENV, f"{asked.start}-{asked.stop - 1}")
    mine = ports.free_ports(3)
    child = _picks_in_a_child(2)  # one port is left for it; the second pick finds none
    assert len(set(mine)) == 3 and set(mine) <= set(asked)
    assert [int(p) for p in child.stdout.split()] == sorted(set(asked) - set(mine))
    assert child.returncode == 1 and f"no free port left in {ports.PORTS_ENV}={asked.start}-" in child.stderr


def test_a_port_is_released_once_bound_and_picked_again_once_free(claims: dict[int, socket.socket],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    asked = quiet_range(1)
    monkeypatch.setenv(ports.PORTS_ENV, f"{asked.start}-{asked.start}")
    port = ports.free_port()
    with socket.create_server(("127.0.0.1", port)):  # the server it was picked for
        with pytest.raises(OSError, match="no free port left"):
            ports.free_port()
        assert port not in claims  # the listener holds it now
    assert ports.free_port() == port


def test_without_a_range_the_kernel_picks() -> None:
    env = {k: v for k, v in os.environ.items() if k != ports.PORTS_ENV}
    assert ports.port_range(env) is None
    picked = subprocess.run([sys.executable, "-c", "from tts_triton.processes.ports import free_port; "
                             "print(free_port())"], env=env, capture_output=True, text=True, timeout=60, check=True)
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert low <= int(picked.stdout) <= high


@pytest.mark.parametrize("value", ["20000", "20000-", "b-c", "5-4", "0-10", "65000-70000"])
def test_a_malformed_range_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match=f"{ports.PORTS_ENV}={value!r}: expected LOW-HIGH"):
        ports.port_range({ports.PORTS_ENV: value})


@pytest.mark.parametrize(("local", "default"), [("32768 60999", "30768-32767"), ("40000 40019", "38000-39999"),
                                                ("1100 1200", "1201-3200")])
def test_the_suites_default_range_lies_outside_the_local_range(local: str, default: str) -> None:
    assert default_test_ports(local) == default


def test_the_session_picks_from_its_range() -> None:
    assert ports.free_port() in ports.port_range()
