"""Several Triton endpoints behind one client: the addresses, and the least-outstanding-streams balancer.

Targets (:func:`parse_targets`): ``host:port``, ``grpc://host:port`` or ``dns:///name:port`` (every address the
name resolves to), as a sequence or comma-separated. A ``dns:///`` target is resolved again every
:data:`RESOLVE_INTERVAL_S` and soon after any endpoint failed, so that pods which come and go are followed.

Policy of :class:`Balancer` (no I/O of its own: the clients report outcomes, run the probes and the resolving):

- :meth:`~Balancer.pick` gives a new stream the usable endpoint with the fewest streams in flight, ties broken at
  random. Usable: neither ejected nor cooling down. When none is usable, it falls back to those cooling down,
  then to the ejected ones (a request is tried rather than refused: the error it then gets is the server's own).
- :meth:`~Balancer.done` takes how the stream ended, by the client's error classes
  (:mod:`~tts_triton.client.errors`): :class:`ServerBusyError` (the server's admission bound) cools the endpoint
  down for :data:`COOLDOWN_S` (no new streams, no probe); :class:`ServerUnavailableError` (connection refused,
  server or model not ready, a draining server's unloaded model) ejects it at once; any other failure but bad
  input counts (timeouts included: a stalled stream, or one too slow for its deadline), and
  :data:`FAILURES_TO_EJECT` in a row eject it. Success and bad input reset the count.
- An ejected endpoint is probed (:meth:`~Balancer.due_probes`, :meth:`~Balancer.probed`) first after
  :data:`PROBE_FIRST_S`, then at doubling intervals up to :data:`PROBE_MAX_S`; a probe that finds it ready
  brings it back.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .errors import InvalidInputError, ServerBusyError, ServerUnavailableError

__all__ = ["COOLDOWN_S", "FAILURES_TO_EJECT", "PROBE_FIRST_S", "PROBE_MAX_S", "RESOLVE_INTERVAL_S", "Balancer",
           "Endpoint", "EndpointState", "parse_targets", "resolve"]

#: Seconds a busy endpoint gets no new streams (its admission bound refused one: it is full now, not broken).
COOLDOWN_S = 2.0
#: Failures in a row (other than busy or unavailable, which act at once) that eject an endpoint.
FAILURES_TO_EJECT = 3
#: Seconds from an ejection to its first probe, and the most between two probes (the interval doubles).
PROBE_FIRST_S = 0.5
PROBE_MAX_S = 8.0
#: Seconds between two resolutions of a ``dns:///`` target; after a failure, at most RESOLVE_AFTER_FAILURE_S.
RESOLVE_INTERVAL_S = 30.0
RESOLVE_AFTER_FAILURE_S = 1.0
DNS_SCHEME = "dns:///"


def parse_targets(targets: str | Sequence[str], scheme: str = "grpc") -> tuple[str, ...]:
    """The targets of ``targets`` (a string, comma-separated, or a sequence of such strings), each ``host:port``
    or ``dns:///name:port``: a ``<scheme>://`` prefix is dropped. Raises ``ValueError`` naming a bad one."""
    items = [targets] if isinstance(targets, str) else list(targets)
    parsed: list[str] = []
    for item in items:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            if part.startswith(DNS_SCHEME):
                name = part.removeprefix(DNS_SCHEME).rstrip("/")
                _split_port(name, part)
                parsed.append(DNS_SCHEME + name)
                continue
            prefix, sep, rest = part.partition("://")
            if sep and prefix != scheme:
                raise ValueError(f"expected a {scheme}:// URL, {DNS_SCHEME}NAME:PORT or host:port, got {part!r}")
            address = (rest if sep else part).rstrip("/")
            _split_port(address, part)
            parsed.append(address)
    if not parsed:
        raise ValueError(f"no endpoint in {targets!r}")
    return tuple(dict.fromkeys(parsed))


def _split_port(address: str, given: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{given!r}: expected host:port (a port is required)")
    return host.strip("[]"), int(port)


def resolve(name: str) -> list[str]:
    """``host:port`` of every TCP address that ``name`` (``host:port``) resolves to; [] when it resolves to none."""
    host, port = _split_port(name, name)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return []
    addresses = (info[4][0] for info in infos)
    return list(dict.fromkeys(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in addresses))


@dataclass(eq=False)
class Endpoint:
    """One server address and what the balancer knows of it. Counters only grow."""

    address: str
    in_flight: int = 0
    started: int = 0
    ejections: int = 0
    retries: int = 0
    ejected: bool = False
    cooling_until: float = 0.0
    failures: int = 0
    probe_at: float = 0.0
    probe_interval: float = PROBE_FIRST_S
    probing: bool = False


@dataclass(frozen=True)
class EndpointState:
    """A snapshot of one endpoint, for metrics and reports."""

    address: str
    in_flight: int
    started: int
    ejections: int
    retries: int
    usable: bool


class Balancer:
    """Least outstanding streams over ``targets`` (see the module docstring); thread-safe.

    ``targets`` as for :func:`parse_targets` with ``scheme``; ``resolver`` turns a ``dns:///`` target's
    ``name:port`` into addresses (default :func:`resolve`), ``clock`` gives seconds (default
    ``time.monotonic``), ``rng`` breaks ties. The constructor resolves once;
    later resolutions happen in :meth:`refresh`, which the clients call from their background prober.
    """

    def __init__(self, targets: str | Sequence[str], *, scheme: str = "grpc",
                 resolver: Callable[[str], list[str]] = resolve, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.targets = parse_targets(targets, scheme)
        self._resolver, self._clock, self._rng = resolver, clock, rng or random.Random()
        self._lock = threading.Lock()
        self._endpoints: dict[str, Endpoint] = {}
        self._resolve_at = 0.0
        self._resolved: dict[str, list[str]] = {}  # dns:/// target -> its latest non-empty addresses
        self.refresh(force=True)

    @property
    def dynamic(self) -> bool:
        """Whether a target is a ``dns:///`` name (its addresses may change)."""
        return any(t.startswith(DNS_SCHEME) for t in self.targets)

    def endpoints(self) -> list[Endpoint]:
        with self._lock:
            return list(self._endpoints.values())

    def snapshot(self) -> list[EndpointState]:
        now = self._clock()
        with self._lock:
            return [EndpointState(e.address, e.in_flight, e.started, e.ejections, e.retries, self._usable(e, now))
                    for e in self._endpoints.values()]

    def refresh(self, *, force: bool = False) -> None:
        """Resolve the ``dns:///`` targets when due (or ``force``): new addresses join; gone ones leave (streams
        on them finish). A name that resolves to nothing keeps its previous addresses."""
        now = self._clock()
        with self._lock:
            if not force and now < self._resolve_at:
                return
            self._resolve_at = now + RESOLVE_INTERVAL_S
        for target in self.targets:
            if target.startswith(DNS_SCHEME):
                found = self._resolver(target.removeprefix(DNS_SCHEME))
                if found or target not in self._resolved:
                    self._resolved[target] = found
        addresses = [a for t in self.targets for a in self._resolved.get(t, [t])]
        with self._lock:
            old = self._endpoints
            self._endpoints = {a: old.get(a) or Endpoint(a) for a in dict.fromkeys(addresses)}

    def ranked(self, exclude: Iterable[Endpoint] = ()) -> list[Endpoint]:
        """The endpoints not in ``exclude``, best first: usable ones by fewest streams in flight (ties in random
        order), then those cooling down, then the ejected ones (each group ordered the same way)."""
        with self._lock:
            return self._ranked(exclude, self._clock())

    def pick(self, exclude: Iterable[Endpoint] = ()) -> Endpoint | None:
        """The endpoint for a new stream, first of :meth:`ranked` (its in-flight count taken), or None when every
        endpoint is in ``exclude`` or there is none."""
        with self._lock:
            ranked = self._ranked(exclude, self._clock())
            if not ranked:
                return None
            chosen = ranked[0]
            chosen.in_flight += 1
            chosen.started += 1
            return chosen

    def untried(self, tried: Iterable[Endpoint]) -> bool:
        """Whether an endpoint not in ``tried`` is there to send to."""
        excluded = {id(e) for e in tried}
        with self._lock:
            return any(id(e) not in excluded for e in self._endpoints.values())

    def _ranked(self, exclude: Iterable[Endpoint], now: float) -> list[Endpoint]:
        excluded = {id(e) for e in exclude}
        if not self._endpoints:
            self._resolve_at = min(self._resolve_at, now + RESOLVE_AFTER_FAILURE_S)
        keys = {id(e): (0 if self._usable(e, now) else 1 if not e.ejected else 2, e.in_flight, self._rng.random())
                for e in self._endpoints.values() if id(e) not in excluded}
        return sorted((e for e in self._endpoints.values() if id(e) in keys), key=lambda e: keys[id(e)])

    def done(self, endpoint: Endpoint, error: BaseException | None) -> None:
        """A stream on ``endpoint`` ended, with ``error`` (None: fine, or ended by the caller)."""
        now = self._clock()
        with self._lock:
            endpoint.in_flight -= 1
            if error is None or isinstance(error, InvalidInputError):
                endpoint.failures = 0
            elif isinstance(error, ServerBusyError):
                endpoint.cooling_until = now + COOLDOWN_S
            elif isinstance(error, ServerUnavailableError):
                self._eject(endpoint, now)
            else:  # a failure of the server's, or a timeout (a stalled stream or one too slow for its deadline)
                endpoint.failures += 1
                if endpoint.failures >= FAILURES_TO_EJECT:
                    self._eject(endpoint, now)

    def retried(self, endpoint: Endpoint) -> None:
        """A request that failed on ``endpoint`` before any audio is being sent again (elsewhere if possible)."""
        with self._lock:
            endpoint.retries += 1

    def due_probes(self) -> list[Endpoint]:
        """Ejected endpoints whose probe is due now (each marked as being probed until :meth:`probed`)."""
        now = self._clock()
        with self._lock:
            due = [e for e in self._endpoints.values() if e.ejected and not e.probing and e.probe_at <= now]
            for e in due:
                e.probing = True
            return due

    def probed(self, endpoint: Endpoint, ready: bool) -> None:
        """A probe of ``endpoint`` found it ``ready`` (back in at once) or not (probed again later); also what a
        readiness check found for an endpoint that is not ejected (not ready: ejected)."""
        now = self._clock()
        with self._lock:
            endpoint.probing = False
            if ready:
                endpoint.ejected, endpoint.failures = False, 0
                endpoint.probe_interval = PROBE_FIRST_S
            elif not endpoint.ejected:
                self._eject(endpoint, now)
            else:
                endpoint.probe_interval = min(endpoint.probe_interval * 2, PROBE_MAX_S)
                endpoint.probe_at = now + endpoint.probe_interval

    def _eject(self, endpoint: Endpoint, now: float) -> None:
        if not endpoint.ejected:
            endpoint.ejected = True
            endpoint.ejections += 1
            endpoint.probe_interval = PROBE_FIRST_S
            endpoint.probe_at = now + PROBE_FIRST_S
        endpoint.failures = 0
        self._resolve_at = min(self._resolve_at, now + RESOLVE_AFTER_FAILURE_S)

    @staticmethod
    def _usable(endpoint: Endpoint, now: float) -> bool:
        return not endpoint.ejected and endpoint.cooling_until <= now

