"""The least-outstanding balancer's rules, with a hand-driven clock and resolver (pure logic, no server)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tts_triton.client import InvalidInputError, ServerBusyError, ServerUnavailableError, TTSError, TTSTimeoutError
from tts_triton.client.balancer import (
    COOLDOWN_S,
    FAILURES_TO_EJECT,
    PROBE_FIRST_S,
    PROBE_MAX_S,
    RESOLVE_AFTER_FAILURE_S,
    RESOLVE_INTERVAL_S,
    Balancer,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def balancer(targets: str, clock: Clock, **kwargs: object) -> Balancer:
    return Balancer(targets, clock=clock, rng=random.Random(0), **kwargs)  # type: ignore[arg-type]


def by_address(b: Balancer) -> dict[str, object]:
    return {e.address: e for e in b.endpoints()}


def test_fewest_in_flight_wins_and_ties_spread_at_random() -> None:
    b = balancer("a:1,b:1,c:1", Clock())
    held = [b.pick() for _ in range(3)]
    assert sorted(e.address for e in held) == ["a:1", "b:1", "c:1"]  # one each before any gets a second
    b.done(held[0], None)
    assert b.pick() is held[0]  # the only one with fewer streams
    firsts = Counter()
    for _ in range(300):  # all idle: each tie goes to a random one
        e = b.pick()
        firsts[e.address] += 1
        b.done(e, None)
    assert set(firsts) == {"a:1", "b:1", "c:1"} and min(firsts.values()) > 60


def test_unavailable_ejects_until_a_probe_finds_it_ready() -> None:
    clock = Clock()
    b = balancer("a:1,b:1", clock)
    a, bb = by_address(b)["a:1"], by_address(b)["b:1"]
    b.pick([bb])
    b.done(a, ServerUnavailableError("connection refused"))
    assert [e.address for e in (b.pick() for _ in range(3))] == ["b:1"] * 3  # no stream to the ejected one
    assert b.due_probes() == []
    clock.now += PROBE_FIRST_S
    assert b.due_probes() == [a] and b.due_probes() == []  # one probe at a time
    b.probed(a, False)  # still down: the next probe waits twice as long
    clock.now += PROBE_FIRST_S
    assert b.due_probes() == []
    clock.now += PROBE_FIRST_S
    assert b.due_probes() == [a]
    b.probed(a, True)
    assert b.pick() is a  # back, and idle
    state = {s.address: s for s in b.snapshot()}
    assert state["a:1"].ejections == 1 and state["a:1"].usable and state["b:1"].in_flight == 3


def test_probe_interval_doubles_up_to_its_cap() -> None:
    clock = Clock()
    b = balancer("a:1", clock)
    (a,) = b.endpoints()
    b.done(b.pick(), ServerUnavailableError("down"))
    waits = []
    for _ in range(8):
        start = clock.now
        while not b.due_probes():
            clock.now += 0.25
        waits.append(clock.now - start)
        b.probed(a, False)
    assert waits[:4] == [PROBE_FIRST_S, 2 * PROBE_FIRST_S, 4 * PROBE_FIRST_S, 8 * PROBE_FIRST_S]
    assert max(waits) == PROBE_MAX_S


def test_busy_cools_down_without_ejection() -> None:
    clock = Clock()
    b = balancer("a:1,b:1", clock)
    a = by_address(b)["a:1"]
    first = b.pick()
    b.done(first, None)
    b.done(b.pick([by_address(b)["b:1"]]), ServerBusyError("server busy"))
    assert all(b.pick() is not a for _ in range(4))
    clock.now += COOLDOWN_S
    assert b.pick() is a  # fewest in flight once the cooldown is over
    assert {s.address: s.ejections for s in b.snapshot()} == {"a:1": 0, "b:1": 0}
    assert b.due_probes() == []


def test_other_failures_eject_only_in_a_row() -> None:
    b = balancer("a:1,b:1", Clock())
    a, other = by_address(b)["a:1"], by_address(b)["b:1"]
    for _ in range(FAILURES_TO_EJECT - 1):
        b.done(b.pick([other]), TTSError("model 'vocoder' failed"))
    b.done(b.pick([other]), None)  # a success resets the count
    for _ in range(FAILURES_TO_EJECT - 1):
        b.done(b.pick([other]), TTSError("model 'vocoder' failed"))
    b.done(b.pick([other]), InvalidInputError("TEXT: empty"))  # the caller's fault: resets it too
    for _ in range(FAILURES_TO_EJECT - 1):
        b.done(b.pick([other]), TTSTimeoutError("no response from the server for 60 s"))
    assert not a.ejected
    b.done(b.pick([other]), TTSError("model 'vocoder' failed"))
    assert a.ejected and not other.ejected


def test_fallbacks_when_nothing_is_usable() -> None:
    clock = Clock()
    b = balancer("a:1,b:1", clock)
    a, bb = by_address(b)["a:1"], by_address(b)["b:1"]
    b.done(b.pick([bb]), ServerUnavailableError("down"))
    b.done(b.pick([a]), ServerBusyError("server busy"))
    assert b.pick() is bb  # cooling beats ejected
    b.done(bb, ServerUnavailableError("down"))
    assert b.pick() is not None  # all ejected: still tried
    assert b.pick([a, bb]) is None and not b.untried([a, bb]) and b.untried([a])


def test_dns_targets_follow_the_name_and_resolve_soon_after_a_failure() -> None:
    clock = Clock()
    answers = {"tts.ns.svc:8001": ["10.0.0.1:8001", "10.0.0.2:8001"]}
    b = balancer("dns:///tts.ns.svc:8001,static:9", clock, resolver=lambda name: list(answers[name]))
    assert b.dynamic and sorted(by_address(b)) == ["10.0.0.1:8001", "10.0.0.2:8001", "static:9"]
    kept = by_address(b)["10.0.0.2:8001"]
    answers["tts.ns.svc:8001"] = ["10.0.0.2:8001", "10.0.0.3:8001"]
    b.refresh()
    assert "10.0.0.1:8001" in by_address(b)  # not due yet
    clock.now += RESOLVE_INTERVAL_S
    b.refresh()
    assert sorted(by_address(b)) == ["10.0.0.2:8001", "10.0.0.3:8001", "static:9"]
    assert by_address(b)["10.0.0.2:8001"] is kept  # an address that stays keeps its state
    answers["tts.ns.svc:8001"] = []  # a name with no ready pod keeps what it had
    clock.now += RESOLVE_INTERVAL_S
    b.refresh()
    assert sorted(by_address(b)) == ["10.0.0.2:8001", "10.0.0.3:8001", "static:9"]
    answers["tts.ns.svc:8001"] = ["10.0.0.4:8001"]
    b.refresh()
    assert "10.0.0.4:8001" not in by_address(b)
    b.done(b.pick(), ServerUnavailableError("connection refused"))  # a failure brings the next resolution near
    clock.now += RESOLVE_AFTER_FAILURE_S
    b.refresh()
    assert "10.0.0.4:8001" in by_address(b)


def test_bad_targets_are_refused() -> None:
    with pytest.raises(ValueError, match="port"):
        Balancer("dns:///tts.ns.svc")
